package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// seeded returns a fake registry holding two versions of one subject and
// one of another.
func seeded(t *testing.T, opts ...srfake.Option) *srfake.Registry {
	t.Helper()
	reg := srfake.New(opts...)
	t.Cleanup(reg.Close)
	for _, s := range []struct{ subject, schema string }{
		{"order-events-OrderCreated", `{"title":"OrderCreated","type":"object"}`},
		{"order-events-OrderCreated", `{"title":"OrderCreated","type":"object","properties":{"a":{}}}`},
		{"account-events-value", `{"type":"record","name":"AccountDebited","fields":[]}`},
	} {
		typ := sr.TypeJSON
		if strings.Contains(s.schema, "record") {
			typ = sr.TypeAvro
		}
		if _, _, err := reg.RegisterSchema(s.subject, sr.Schema{Schema: s.schema, Type: typ}); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func TestListGetAndDeleteSubjects(t *testing.T) {
	reg := seeded(t)
	url := "--registry=" + reg.URL()

	code, out, errOut := schemactl(t, "list", url)
	if code != 0 || out != "account-events-value\norder-events-OrderCreated\n" {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := schemactl(t, "list", url, "--prefix", "order-"); code != 0 || out != "order-events-OrderCreated\n" {
		t.Fatalf("list --prefix: exit %d\n%s", code, out)
	}
	if code, out, _ := schemactl(t, "list", url, "--format", "json", "order-events-OrderCreated"); code != 0 ||
		out != `{"subject":"order-events-OrderCreated","version":1}`+"\n"+`{"subject":"order-events-OrderCreated","version":2}`+"\n" {
		t.Fatalf("list SUBJECT --format json: exit %d\n%s", code, out)
	}

	code, out, _ = schemactl(t, "get", url, "order-events-OrderCreated")
	if code != 0 || !strings.HasPrefix(out, "order-events-OrderCreated version 2 (id ") || !strings.Contains(out, `"properties"`) {
		t.Fatalf("get latest: exit %d\n%s", code, out)
	}
	code, out, _ = schemactl(t, "get", url, "--format", "json", "order-events-OrderCreated", "1")
	var got registered
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Version != 1 || got.SchemaType != "JSON" || got.ID == 0 ||
		string(got.Schema) != `{"title":"OrderCreated","type":"object"}` {
		t.Fatalf("get 1 --format json: exit %d, %v\n%s", code, err, out)
	}
	if code, _, errOut := schemactl(t, "get", url, "order-events-OrderCreated", "7"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("get of a missing version: exit %d, want 1\n%s", code, errOut)
	}

	// A soft delete hides the version; --deleted still finds it.
	if code, out, _ := schemactl(t, "delete", url, "order-events-OrderCreated", "2"); code != 0 || out != "order-events-OrderCreated: deleted versions [2] (soft)\n" {
		t.Fatalf("soft delete of version 2: exit %d\n%s", code, out)
	}
	if _, out, _ := schemactl(t, "list", url, "order-events-OrderCreated"); out != "order-events-OrderCreated 1\n" {
		t.Fatalf("versions after the soft delete:\n%s", out)
	}
	if code, _, _ := schemactl(t, "get", url, "--deleted", "order-events-OrderCreated", "2"); code != 0 {
		t.Fatalf("get --deleted of the soft-deleted version: exit %d", code)
	}

	// A permanent delete of the whole subject, soft-deleting first.
	code, out, errOut = schemactl(t, "delete", url, "--permanent", "--format", "json", "order-events-OrderCreated")
	if code != 0 || out != `{"subject":"order-events-OrderCreated","versions":[1,2],"permanent":true}`+"\n" {
		t.Fatalf("permanent delete: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := schemactl(t, "list", url, "--deleted"); out != "account-events-value\n" {
		t.Fatalf("subjects after the permanent delete, deleted ones included:\n%s", out)
	}
	if code, _, errOut := schemactl(t, "delete", url, "no-such-subject"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("delete of a missing subject: exit %d, want 1\n%s", code, errOut)
	}
}

func TestRegistryAuthenticationFromFlagsAndEnvironment(t *testing.T) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ci:s3cret"))
	for _, tc := range []struct {
		name   string
		expect string // the Authorization header the registry requires
		args   []string
		env    map[string]string
		ok     bool
	}{
		{"basic from flags", basic, []string{"--registry-user", "ci", "--registry-password", "s3cret"}, nil, true},
		{"basic from the environment", basic, nil, map[string]string{"CONCORD_SCHEMA_REGISTRY_USER": "ci", "CONCORD_SCHEMA_REGISTRY_PASSWORD": "s3cret"}, true},
		{"basic, wrong password", basic, []string{"--registry-user", "ci", "--registry-password", "guess"}, nil, false},
		{"bearer from the flag", "Bearer tok", []string{"--registry-token", "tok"}, nil, true},
		{"bearer from the environment", "Bearer tok", nil, map[string]string{"CONCORD_SCHEMA_REGISTRY_TOKEN": "tok"}, true},
		{"no credentials", "Bearer tok", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			reg := seeded(t, srfake.WithAuth(tc.expect))
			code, out, errOut := schemactl(t, append([]string{"list", "--registry", reg.URL()}, tc.args...)...)
			if (code == 0) != tc.ok {
				t.Fatalf("exit %d, want success %v\n%s%s", code, tc.ok, out, errOut)
			}
			if tc.ok && !strings.Contains(out, "order-events-OrderCreated") {
				t.Fatalf("authenticated list:\n%s", out)
			}
		})
	}
	if code, _, errOut := schemactl(t, "list", "--registry", "http://127.0.0.1:1", "--registry-token", "t", "--registry-user", "u"); code != 2 || !strings.Contains(errOut, "exclusive") {
		t.Fatalf("token and user together: exit %d\n%s", code, errOut)
	}
}

// pki is a test CA with a server and a client certificate, as PEM files.
type pki struct {
	caFile, certFile, keyFile string
	server                    tls.Certificate
	pool                      *x509.CertPool
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sc, sk := issue(2, x509.ExtKeyUsageServerAuth)
	cc, ck := issue(3, x509.ExtKeyUsageClientAuth)
	server, err := tls.X509KeyPair(sc, sk)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pki{
		caFile:   write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		certFile: write("client.pem", cc), keyFile: write("client-key.pem", ck),
		server: server, pool: pool,
	}
}

func TestRegistryOverMutualTLS(t *testing.T) {
	p := newPKI(t)
	reg := seeded(t)
	srv := httptest.NewUnstartedServer(reg.Handler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.pool}
	srv.StartTLS()
	defer srv.Close()

	if code, out, errOut := schemactl(t, "list", "--registry", srv.URL, "--registry-ca-file", p.caFile,
		"--registry-cert-file", p.certFile, "--registry-key-file", p.keyFile); code != 0 || !strings.Contains(out, "account-events-value") {
		t.Fatalf("mutual TLS: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv("CONCORD_SCHEMA_REGISTRY_CA_FILE", p.caFile)
	t.Setenv("CONCORD_SCHEMA_REGISTRY_CERT_FILE", p.certFile)
	t.Setenv("CONCORD_SCHEMA_REGISTRY_KEY_FILE", p.keyFile)
	if code, _, errOut := schemactl(t, "list", "--registry", srv.URL); code != 0 {
		t.Fatalf("mutual TLS from the environment: exit %d\n%s", code, errOut)
	}
	// Without the client certificate the server refuses the handshake;
	// without the CA the client refuses the server.
	t.Setenv("CONCORD_SCHEMA_REGISTRY_CERT_FILE", "")
	t.Setenv("CONCORD_SCHEMA_REGISTRY_KEY_FILE", "")
	if code, _, _ := schemactl(t, "list", "--registry", srv.URL); code == 0 {
		t.Fatal("a client without a certificate was served")
	}
	t.Setenv("CONCORD_SCHEMA_REGISTRY_CA_FILE", "")
	if code, _, _ := schemactl(t, "list", "--registry", srv.URL, "--registry-cert-file", p.certFile, "--registry-key-file", p.keyFile); code == 0 {
		t.Fatal("a registry with an unknown CA was trusted")
	}
	for name, args := range map[string][]string{
		"cert without key": {"--registry-cert-file", p.certFile},
		"missing CA file":  {"--registry-ca-file", filepath.Join(t.TempDir(), "none.pem")},
		"CA file not PEM":  {"--registry-ca-file", p.keyFile + ".nope"},
	} {
		code, _, errOut := schemactl(t, append([]string{"list", "--registry", srv.URL}, args...)...)
		if code != 2 || !strings.Contains(errOut, "--registry-") {
			t.Errorf("%s: exit %d, want 2 naming the flag\n%s", name, code, errOut)
		}
	}
}

func TestRegisterFormatJSON(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	code, out, errOut := schemactl(t, "register", "--registry", reg.URL(), "--dir", moduleRoot, "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var first pushResult
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Status != "registered" || first.ID == 0 || first.Subject == "" {
		t.Fatalf("first line %q: %v", lines[0], err)
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("not a JSON line: %q", l)
		}
	}
}
