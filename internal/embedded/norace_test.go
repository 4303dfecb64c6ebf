//go:build !race

package embedded_test

const raceBuild = false
