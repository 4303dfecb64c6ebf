package config

import (
	"errors"

	"github.com/goccy/go-yaml/token"
)

// tokenOf extracts the position-carrying token from a goccy-yaml error.
func tokenOf(err error) *token.Token {
	var te interface{ GetToken() *token.Token }
	if errors.As(err, &te) {
		return te.GetToken()
	}
	return nil
}
