package rootcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

func TestNewReportsEveryBadOption(t *testing.T) {
	_, err := New(nil, Options{
		MeshNamespace:      "Not_A_Label",
		SourceConfigMap:    "bad name",
		SourceKey:          "bad/key",
		ExcludedNamespaces: []string{"fine", "-bad"},
		Workers:            -1,
	})
	if err == nil {
		t.Fatal("New accepted invalid options")
	}
	for _, want := range []string{"nil Kubernetes client", "Options.MeshNamespace", "Options.SourceConfigMap",
		"Options.SourceKey", "Options.ExcludedNamespaces[1]", "Options.Workers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "ExcludedNamespaces[0]") {
		t.Errorf("error blames a valid excluded namespace:\n%v", err)
	}
}

func TestNewRequiresMeshNamespace(t *testing.T) {
	_, err := New(fake.NewClientset(), Options{})
	if err == nil || !strings.Contains(err.Error(), "Options.MeshNamespace") {
		t.Fatalf("New without a mesh namespace: err = %v", err)
	}
}

func TestNewDefaults(t *testing.T) {
	c, err := New(fake.NewClientset(), Options{MeshNamespace: "istio-system"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "namespace" || c.opts.SourceConfigMap != DefaultSourceConfigMap || c.opts.SourceKey != DefaultSourceKey ||
		c.opts.Workers != 4 || len(c.excluded) != 0 || c.opts.Logger == nil {
		t.Fatalf("defaults not applied: %+v", c.opts)
	}
}

func TestGeneratedRootCert(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pemText, err := generateRootCert(now)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCertificates(pemText); err != nil {
		t.Fatalf("generated certificate does not check: %v", err)
	}
	cert := parseOne(t, pemText)
	key, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || key.Curve != elliptic.P256() {
		t.Errorf("public key = %T, want ECDSA P-256", cert.PublicKey)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("not a CA certificate: IsCA=%v usage=%v", cert.IsCA, cert.KeyUsage)
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	if !cert.NotBefore.Before(now) || cert.NotAfter.Before(now.AddDate(9, 11, 0)) || cert.NotAfter.After(now.AddDate(10, 0, 1)) {
		t.Errorf("validity %v .. %v, want about ten years from %v", cert.NotBefore, cert.NotAfter, now)
	}
	other, _ := generateRootCert(now)
	if other == pemText {
		t.Error("two generated certificates are identical")
	}
}

func TestCheckCertificates(t *testing.T) {
	a, _ := generateRootCert(time.Now())
	b, _ := generateRootCert(time.Now())
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1, 2, 3}}))
	junkCert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}))
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"one", a, true},
		{"bundle", a + b, true},
		{"trailing newline", a + "\n\n", true},
		{"empty", "", false},
		{"text", "hello", false},
		{"private key", keyPEM, false},
		{"cert then key", a + keyPEM, false},
		{"unparsable", junkCert, false},
		{"trailing junk", a + "junk", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkCertificates(tc.in); (err == nil) != tc.ok {
				t.Fatalf("checkCertificates = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func parseOne(t *testing.T, s string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		t.Fatalf("no PEM block in %q", s)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
