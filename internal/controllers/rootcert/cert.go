package rootcert

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// generatedValidity is how long a generated root certificate is valid.
const generatedValidity = 10 * 365 * 24 * time.Hour

// generateRootCert returns a PEM-encoded self-signed CA certificate with a
// fresh ECDSA P-256 key, valid from an hour before now (tolerating clock
// skew) for ten years. The key is discarded.
func generateRootCert(now time.Time) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generate root key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return "", fmt.Errorf("generate serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"meshd"}, CommonName: "meshd self-signed root CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(generatedValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", fmt.Errorf("self-sign root certificate: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), nil
}

// checkCertificates reports whether s is one or more PEM CERTIFICATE
// blocks, each a parsable X.509 certificate.
func checkCertificates(s string) error {
	rest := []byte(s)
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("PEM block %d is a %q, not a CERTIFICATE", n, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("PEM block %d: %w", n, err)
		}
	}
	if n == 0 {
		return errors.New("no PEM certificate found")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return errors.New("trailing data after the last PEM certificate")
	}
	return nil
}

// sameCertificates reports whether a and b hold the same certificates in
// the same order, whatever the PEM layout (line breaks, headers, space
// around the blocks).
func sameCertificates(a, b string) bool {
	da, db := certificateBytes(a), certificateBytes(b)
	if len(da) == 0 || len(da) != len(db) {
		return false
	}
	for i := range da {
		if !bytes.Equal(da[i], db[i]) {
			return false
		}
	}
	return true
}

// certificateBytes returns the DER bytes of every CERTIFICATE block of s.
func certificateBytes(s string) [][]byte {
	var out [][]byte
	rest := []byte(s)
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return out
		}
		if block.Type == "CERTIFICATE" {
			out = append(out, block.Bytes)
		}
	}
}
