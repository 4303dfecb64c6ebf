package config

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Secret is a resolved password. Every way of printing it (fmt verbs,
// encoding/json, encoding.TextMarshaler, log/slog) prints "[redacted]"; only
// Reveal returns it.
type Secret struct{ v string }

const redacted = "[redacted]"

func (s Secret) String() string               { return redacted }
func (s Secret) GoString() string             { return redacted }
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (s Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }

// Format prints "[redacted]" whatever the verb (%v, %+v, %#v, %s, %q, %x...).
func (s Secret) Format(f fmt.State, verb rune) { fmt.Fprint(f, redacted) }

// Reveal returns the secret itself, for the one call that needs it.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether the secret is empty (no password configured).
func (s Secret) IsZero() bool { return s.v == "" }

// readSecret resolves a password from an environment variable or a file at
// the moment it is needed, so a rotated secret is picked up on restart and
// never sits in the Config. A relative file is resolved against dir (the
// config file's directory). Errors name the variable or the file, never
// the content.
func readSecret(section, env, file, dir string) (Secret, error) {
	return readSecretAs(section+".password_env", section+".password_file", env, file, dir)
}

// readSecretAs is readSecret for keys named envKey and fileKey.
func readSecretAs(envKey, fileKey, env, file, dir string) (Secret, error) {
	switch {
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok {
			return Secret{}, fmt.Errorf("%s: environment variable %s is not set", envKey, env)
		}
		return Secret{v}, nil
	case file != "":
		if !filepath.IsAbs(file) && dir != "" {
			file = filepath.Join(dir, file)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return Secret{}, fmt.Errorf("%s: %w", fileKey, err)
		}
		v := string(b)
		if t, ok := strings.CutSuffix(v, "\n"); ok {
			v = strings.TrimSuffix(t, "\r")
		}
		return Secret{v}, nil
	}
	return Secret{}, nil
}

// Password reads the ClickHouse password from password_env or password_file
// now; it is empty when neither is set.
func (c *ClickHouse) Password() (Secret, error) {
	return readSecret("clickhouse", c.PasswordEnv, c.PasswordFile, c.dir)
}

// Password reads the SMTP password from password_env or password_file now;
// it is empty when neither is set.
func (s *SMTP) Password() (Secret, error) {
	return readSecret("smtp", s.PasswordEnv, s.PasswordFile, s.dir)
}

// Password reads the Keeper digest password from password_env or
// password_file now; it is empty when neither is set.
func (k *Keeper) Password() (Secret, error) {
	return readSecret("keeper", k.PasswordEnv, k.PasswordFile, k.dir)
}

// VisitorKey reads the visitor hash's key from visitors.key_env or
// key_file now; it is empty when neither is set.
func (c *Config) VisitorKey() (Secret, error) {
	return readSecretAs("visitors.key_env", "visitors.key_file", c.Visitors.KeyEnv, c.Visitors.KeyFile, filepath.Dir(c.File))
}
