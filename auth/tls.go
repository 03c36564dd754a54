package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certCheckEvery is how often a handshake may stat the certificate files
// to notice a renewal.
const certCheckEvery = time.Second

// TLSFiles serves the certificate and key files (and the client CA file)
// and re-reads them when they change, so a renewed certificate is served
// without a restart. A file caught half-written fails to parse and the
// previous certificate stays in use until the next check.
type TLSFiles struct {
	CertFile, KeyFile string
	// ClientCAFile, when set, asks clients for a certificate and verifies
	// the one presented against it; a client may still present none.
	ClientCAFile string
	Log          *slog.Logger

	mu       sync.Mutex
	checked  time.Time
	stamp    string
	cert     *tls.Certificate
	clientCA *x509.CertPool
}

// Load reads the files once; an error here stops the server at start.
func (f *TLSFiles) Load() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Log == nil {
		f.Log = slog.Default()
	}
	return f.reload(f.fileStamp())
}

// fileStamp changes when any of the files changes (size, time, inode
// swap by rename).
func (f *TLSFiles) fileStamp() string {
	s := ""
	for _, p := range []string{f.CertFile, f.KeyFile, f.ClientCAFile} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			s += fmt.Sprintf("%s:%d:%d;", p, fi.Size(), fi.ModTime().UnixNano())
		} else {
			s += p + ":missing;"
		}
	}
	return s
}

func (f *TLSFiles) reload(stamp string) error {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s / key %s: %v", f.CertFile, f.KeyFile, err)
	}
	var pool *x509.CertPool
	if f.ClientCAFile != "" {
		pem, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return fmt.Errorf("TLS client CA %s: %v", f.ClientCAFile, err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("TLS client CA %s holds no PEM certificate", f.ClientCAFile)
		}
	}
	f.cert, f.clientCA, f.stamp = &cert, pool, stamp
	return nil
}

// current returns the certificate and client CA, reloading them when the
// files changed since the last check.
func (f *TLSFiles) current() (*tls.Certificate, *x509.CertPool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); now.Sub(f.checked) >= certCheckEvery {
		f.checked = now
		if st := f.fileStamp(); st != f.stamp {
			if err := f.reload(st); err != nil {
				f.Log.Error("TLS files changed but do not load; serving the previous certificate", "error", err.Error())
			} else {
				f.Log.Info("TLS files reloaded", "cert", f.CertFile)
			}
		}
	}
	return f.cert, f.clientCA
}

// Config is the server's TLS configuration: HTTP/2 (gRPC) and HTTP/1.1
// offered by ALPN, the current certificate on every handshake, and with a
// client CA a client certificate verified when presented (an unverified
// one fails the handshake).
func (f *TLSFiles) Config() *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, ca := f.current()
		if cert == nil {
			return nil, errors.New("no TLS certificate loaded")
		}
		c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}, Certificates: []tls.Certificate{*cert}}
		if ca != nil {
			c.ClientCAs, c.ClientAuth = ca, tls.VerifyClientCertIfGiven
		}
		return c, nil
	}
	return base
}
