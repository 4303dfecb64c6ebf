package config

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Secret is a resolved password. Every way of printing it prints
// "[redacted]"; only Reveal returns it.
type Secret struct{ v string }

const redacted = "[redacted]"

func (s Secret) String() string                { return redacted }
func (s Secret) GoString() string              { return redacted }
func (s Secret) MarshalJSON() ([]byte, error)  { return []byte(`"` + redacted + `"`), nil }
func (s Secret) MarshalText() ([]byte, error)  { return []byte(redacted), nil }
func (s Secret) LogValue() slog.Value          { return slog.StringValue(redacted) }
func (s Secret) Format(f fmt.State, verb rune) { fmt.Fprint(f, redacted) }

// Reveal returns the secret itself, for the one call that needs it.
func (s Secret) Reveal() string { return s.v }

// readSecret resolves a password from an environment variable or a file, at
// the moment it is needed (so a rotated secret is picked up on restart).
func readSecret(envName, file, what string) (Secret, error) {
	switch {
	case envName != "":
		v, ok := os.LookupEnv(envName)
		if !ok {
			return Secret{}, fmt.Errorf("%s password: environment variable %s is not set", what, envName)
		}
		return Secret{v}, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return Secret{}, fmt.Errorf("%s password: %w", what, err)
		}
		return Secret{strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")}, nil
	}
	return Secret{}, nil
}

// ResolvePassword resolves the ClickHouse password (empty when none is configured).
func (c *ClickHouse) ResolvePassword() (Secret, error) {
	return readSecret(c.PasswordEnv, c.PasswordFile, "clickhouse")
}

// ResolvePassword resolves the SMTP password.
func (s *SMTP) ResolvePassword() (Secret, error) {
	return readSecret(s.PasswordEnv, s.PasswordFile, "smtp")
}

// ResolvePassword resolves the Keeper digest password.
func (k *Keeper) ResolvePassword() (Secret, error) {
	return readSecret(k.PasswordEnv, k.PasswordFile, "keeper")
}
