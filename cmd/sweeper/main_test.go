package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestCheckConfig(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-check-config", "-config", "../../deploy/hitcount.example.yaml"}, 0, "ok (2 rules)"},
		{[]string{"-check-config", "-config", "../../config/testdata/mistakes.yaml"}, 1, "rules[0].timezone: unknown time zone"},
		{[]string{"-config", "../../deploy/hitcount.example.yaml", "-dry-run"}, 2, "-dry-run goes with -once"},
		{nil, 2, "give -config FILE"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.out) {
			t.Errorf("%v: exit %d, output %q; want exit %d with %q", c.args, code, stdout.String()+stderr.String(), c.code, c.out)
		}
	}
}
