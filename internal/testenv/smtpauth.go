package testenv

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// AuthSMTPServer is a real aiosmtpd server that offers a login (AUTH PLAIN
// or LOGIN), with TLS as its mode says: "starttls" (STARTTLS required
// before the login), "tls" (TLS from the first byte, SMTPS) or "none", with
// a certificate for 127.0.0.1. Messages go to a Maildir.
type AuthSMTPServer struct {
	Port     int
	Username string
	Password string
	// CAFile is the PEM certificate the server presents, self-signed: what
	// a client trusts to verify it (smtp.ca_file). "" without TLS.
	CAFile  string
	Maildir string
}

// Addr is the server's address, host:port.
func (s *AuthSMTPServer) Addr() string { return loopback(s.Port) }

// authServer runs aiosmtpd's Controller, which, unlike its command line,
// takes an authenticator and a TLS context.
const authServer = `
import ssl, sys, threading
from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Mailbox
from aiosmtpd.smtp import AuthResult, LoginPassword

host, port, maildir, user, password, mode, cert, key = sys.argv[1:9]

def authenticator(server, session, envelope, mechanism, auth_data):
    ok = isinstance(auth_data, LoginPassword) and auth_data.login == user.encode() and auth_data.password == password.encode()
    return AuthResult(success=ok, handled=False)

tls = None
if mode != "none":
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
if mode == "tls":
    c = Controller(Mailbox(maildir), hostname=host, port=int(port), authenticator=authenticator,
                   auth_require_tls=False, ssl_context=tls)
else:
    c = Controller(Mailbox(maildir), hostname=host, port=int(port), authenticator=authenticator,
                   auth_require_tls=tls is not None, require_starttls=tls is not None, tls_context=tls)
c.start()
print("ready", flush=True)
threading.Event().wait()
`

// AuthSMTP starts an AuthSMTPServer for the login username:password, in
// TLS mode starttls, tls or none, stopped when the test ends.
func AuthSMTP(t testing.TB, username, password, mode string) *AuthSMTPServer {
	t.Helper()
	Require(t, "python3 (Debian's, with python3-aiosmtpd)", systemPython)
	Require(t, "python3-aiosmtpd", "/usr/lib/python3/dist-packages/aiosmtpd")
	dir := t.TempDir()
	s := &AuthSMTPServer{Port: freePorts(t, 1)[0], Username: username, Password: password, Maildir: filepath.Join(dir, "maildir")}
	script := filepath.Join(dir, "authsmtp.py")
	if err := os.WriteFile(script, []byte(authServer), 0o644); err != nil {
		t.Fatal(err)
	}
	var cert, key string
	if mode != "none" {
		cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		if err := selfSigned(cert, key); err != nil {
			t.Fatal(err)
		}
		s.CAFile = cert
	}
	cmd := exec.Command(systemPython, script, "127.0.0.1", strconv.Itoa(s.Port), s.Maildir, username, password, mode, cert, key)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line == "ready\n"
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("aiosmtpd with AUTH did not start: %s", stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("aiosmtpd with AUTH did not start within 30 s")
	}
	return s
}

// Messages is how many messages the server stored.
func (s *AuthSMTPServer) Messages() int {
	n := 0
	for _, sub := range []string{"new", "cur"} {
		entries, _ := os.ReadDir(filepath.Join(s.Maildir, sub))
		n += len(entries)
	}
	return n
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and localhost,
// and its key, as PEM.
func selfSigned(certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "hitcount test SMTP"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
}
