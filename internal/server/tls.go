package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hookledger/hookledger/metrics"
)

// certReloader serves one certificate and swaps it atomically when the files
// change and SIGHUP arrives: handshakes in progress keep the old one, new
// handshakes get the new one, and a bad file never replaces a good one.
type certReloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert and --tls-key must be given together")
	}
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if _, err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// reload reads both files and, if they hold a valid pair, serves it from now on.
func (r *certReloader) reload() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %s / key %s: %w", r.certFile, r.keyFile, err)
	}
	if cert.Leaf == nil { // only with GODEBUG=x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parse TLS certificate %s: %w", r.certFile, err)
		}
	}
	r.cert.Store(&cert)
	return &cert, nil
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// config is the server TLS configuration: TLS 1.2 or newer, Go's default
// cipher suites (AEAD with forward secrecy only).
func (r *certReloader) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate}
}

// logCert reports the served certificate and warns when it is expired or close.
func logCert(log *slog.Logger, msg string, cert *tls.Certificate) {
	leaf := cert.Leaf
	left := time.Until(leaf.NotAfter)
	attrs := []any{"subject", leaf.Subject.String(), "dns_names", leaf.DNSNames, "not_after", leaf.NotAfter.UTC().Format(time.RFC3339)}
	switch {
	case left <= 0:
		log.Error(msg+": certificate has expired", attrs...)
	case left < 14*24*time.Hour:
		log.Warn(msg+": certificate expires within 14 days", attrs...)
	default:
		log.Info(msg, attrs...)
	}
}

// watchSIGHUP reloads the TLS certificate on every SIGHUP until ctx ends.
// SIGHUP is caught even without TLS, so `kill -HUP` (or systemctl reload)
// never terminates the server by accident.
func watchSIGHUP(ctx context.Context, log *slog.Logger, certs *certReloader, met *metrics.Metrics) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			if certs == nil {
				log.Info("SIGHUP: nothing to reload (no --tls-cert)")
				continue
			}
			cert, err := certs.reload()
			met.TLSReload(err)
			if err != nil {
				log.Error("SIGHUP: TLS certificate not reloaded; still serving the previous one", "error", err.Error())
				continue
			}
			met.SetTLSCertificate(cert.Leaf.NotAfter)
			logCert(log, "SIGHUP: TLS certificate reloaded", cert)
		}
	}()
}
