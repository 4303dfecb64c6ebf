package collector

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// instanceFile holds the collector's instance id in its state directory:
// created at the first start and kept, so the collector is the same one in
// source_owners after a restart (its own records are never another's).
const instanceFile = "collector.id"

var instanceRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

// instanceID reads the collector's id from dir, creating it the first time.
// Without a state directory the id is new for each process.
func instanceID(dir string) (string, error) {
	if dir == "" {
		return newInstanceID()
	}
	path := filepath.Join(dir, instanceFile)
	for range 2 {
		data, err := os.ReadFile(path)
		if err == nil {
			id := strings.TrimSpace(string(data))
			if !instanceRE.MatchString(id) {
				return "", fmt.Errorf("collector id %s: %q is not 16 hex digits (delete the file: a new id is made at the next start)", path, id)
			}
			return id, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("collector id: %w", err)
		}
		if err := createInstanceID(dir, path); err != nil && !errors.Is(err, os.ErrExist) {
			return "", err
		}
		// Created, here or by a collector starting on the same directory
		// at the same moment (the state directory's lock then refuses one
		// of the two): read what is there.
	}
	return "", fmt.Errorf("collector id %s: created but not readable", path)
}

// createInstanceID writes a new id to path, whole or not at all: written
// and synced under a temporary name, then linked to path, which fails if
// path exists (two collectors starting at once keep one id).
func createInstanceID(dir, path string) error {
	id, err := newInstanceID()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, instanceFile+".tmp*")
	if err != nil {
		return fmt.Errorf("collector id: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(id + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("collector id: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("collector id: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func newInstanceID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("collector id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
