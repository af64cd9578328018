package clientprops

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseReadsJavaProperties(t *testing.T) {
	props, err := Parse([]byte("# a comment\n! another\nsecurity.protocol = SASL_SSL\nsasl.mechanism:PLAIN\nclient.id replay-1\n" +
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n    username=\"alice\" \\\n    password=\"s3cr=t;\";\n" +
		"literal=${not.expanded}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "client.id": "replay-1",
		"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cr=t;";`,
		"literal":          "${not.expanded}",
	}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("%s = %q, want %q", k, props[k], v)
		}
	}
}

func TestParseJAAS(t *testing.T) {
	l, err := ParseJAAS(`org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="p\"w=;" tokenauth=false;`)
	if err != nil {
		t.Fatal(err)
	}
	if l.Module != "org.apache.kafka.common.security.scram.ScramLoginModule" || l.Flag != "required" ||
		l.Options["username"] != "bob" || l.Options["password"] != `p"w=;` || l.Options["tokenauth"] != "false" {
		t.Fatalf("%+v", l)
	}
	for _, bad := range []string{
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b"`, // no ;
		`org.apache.kafka.common.security.plain.PlainLoginModule mandatory username="a";`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required username "a";`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="a;`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required ="a";`,
	} {
		if _, err := ParseJAAS(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestSASLMechanisms(t *testing.T) {
	jaas := func(module string) string {
		return "org.apache.kafka.common.security." + module + " required username=\"u\" password=\"p\";"
	}
	for _, tc := range []struct {
		props map[string]string
		mech  string // the mechanism's name; "" for an error
		err   string
	}{
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas("plain.PlainLoginModule")}, "PLAIN", ""},
		{map[string]string{"security.protocol": "sasl_plaintext", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": jaas("scram.ScramLoginModule")}, "SCRAM-SHA-256", ""},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas("scram.ScramLoginModule")}, "SCRAM-SHA-512", ""},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas("scram.ScramLoginModule")}, "", "does not go with sasl.mechanism PLAIN"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": jaas("plain.PlainLoginModule")}, "", "GSSAPI is not supported"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas("plain.PlainLoginModule")}, "", "does not go with sasl.mechanism OAUTHBEARER"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": jaas("plain.PlainLoginModule")}, "", "AWS_MSK_IAM is not supported"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "", "needs sasl.jaas.config"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\";"}, "", "username and password are required"},
		{map[string]string{"security.protocol": "KERBEROS"}, "", `security.protocol "KERBEROS"`},
		{map[string]string{"sasl.mechanism": "PLAIN"}, "", "security.protocol is not"},
	} {
		c, err := FromProperties(tc.props)
		if tc.mech == "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err = %v, want %q", tc.props, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.props, err)
			continue
		}
		if c.SASL == nil || c.SASL.Name() != tc.mech || c.TLS != nil {
			t.Errorf("%v: SASL %v TLS %v, want %s without TLS", tc.props, c.SASL, c.TLS, tc.mech)
		}
	}
}

func TestUnusedPropertiesWarnAndClientIDIsAnOption(t *testing.T) {
	c, err := FromProperties(map[string]string{"security.protocol": "PLAINTEXT", "client.id": "ops", "request.timeout.ms": "1000", "linger.ms": "5"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 2 || !strings.Contains(c.Warnings[0], "'linger.ms'") || !strings.Contains(c.Warnings[1], "'request.timeout.ms'") {
		t.Errorf("warnings %q", c.Warnings)
	}
	cl, err := kgo.NewClient(append(c.Opts(), kgo.SeedBrokers("127.0.0.1:1"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.OptValue(kgo.ClientID); got != "ops" {
		t.Errorf("client id %v", got)
	}
}

// pki is a CA, a broker certificate for host "broker.test" (not for
// 127.0.0.1, so that host name checking can be seen) and a client one.
type pki struct {
	caPEM, serverCert, serverKey, clientCert, clientKey []byte
	ca                                                  *x509.Certificate
}

func newPKI(t *testing.T) pki {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(cn string, usage x509.ExtKeyUsage, dns []string) ([]byte, []byte) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, _ := x509.MarshalPKCS8PrivateKey(k)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
	}
	p := pki{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), ca: ca}
	p.serverCert, p.serverKey = leaf("broker", x509.ExtKeyUsageServerAuth, []string{"broker.test"})
	p.clientCert, p.clientKey = leaf("replay-client", x509.ExtKeyUsageClientAuth, nil)
	return p
}

// tlsBroker accepts TLS connections that must present a client
// certificate signed by the CA and reports the client's common name.
func tlsBroker(t *testing.T, p pki) (addr string, clients <-chan string) {
	t.Helper()
	cert, err := tls.X509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
			if tc.Handshake() == nil {
				ch <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
			}
			tc.Close()
		}
	}()
	return ln.Addr().String(), ch
}

// handshake connects a franz-go client built from the properties to the
// broker and returns the client name the broker saw, or "" when no TLS
// handshake completed.
func handshake(t *testing.T, addr string, clients <-chan string, c Config) string {
	t.Helper()
	cl, err := kgo.NewClient(append(c.Opts(), kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = cl.Ping(ctx) // the broker speaks no Kafka: only the handshake matters
	select {
	case cn := <-clients:
		return cn
	case <-time.After(500 * time.Millisecond):
		return ""
	}
}

func TestTLSClientCertificatesReachTheBroker(t *testing.T) {
	p := newPKI(t)
	addr, clients := tlsBroker(t, p)
	dir := t.TempDir()
	keystore := filepath.Join(dir, "client.pem")
	if err := os.WriteFile(keystore, append(append([]byte{}, p.clientCert...), p.clientKey...), 0o600); err != nil {
		t.Fatal(err)
	}
	truststore := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(truststore, p.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	// The broker's certificate names broker.test, not 127.0.0.1: the host
	// name check is turned off with an empty algorithm, as in Kafka.
	noHostCheck := map[string]string{"ssl.endpoint.identification.algorithm": ""}
	for _, tc := range []struct {
		name  string
		props map[string]string
		want  string
	}{
		{"inline PEM", map[string]string{"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.certificates": string(p.caPEM),
			"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": string(p.clientCert), "ssl.keystore.key": string(p.clientKey)}, "replay-client"},
		{"PEM files", map[string]string{"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": truststore,
			"ssl.keystore.type": "PEM", "ssl.keystore.location": keystore}, "replay-client"},
		{"PEM files without a type", map[string]string{"security.protocol": "SSL", "ssl.truststore.location": truststore,
			"ssl.keystore.location": keystore}, "replay-client"},
		{"no client certificate", map[string]string{"security.protocol": "SSL", "ssl.truststore.location": truststore}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := map[string]string{}
			for k, v := range tc.props {
				props[k] = v
			}
			for k, v := range noHostCheck {
				props[k] = v
			}
			c, err := FromProperties(props)
			if err != nil {
				t.Fatal(err)
			}
			if got := handshake(t, addr, clients, c); got != tc.want {
				t.Fatalf("the broker saw client %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("host name checked by default", func(t *testing.T) {
		c, err := FromProperties(map[string]string{"security.protocol": "SSL", "ssl.truststore.location": truststore, "ssl.keystore.location": keystore})
		if err != nil {
			t.Fatal(err)
		}
		if got := handshake(t, addr, clients, c); got != "" {
			t.Fatalf("a handshake with a certificate for another host succeeded (client %q)", got)
		}
	})
	t.Run("an untrusted broker is refused", func(t *testing.T) {
		other := newPKI(t)
		c, err := FromProperties(map[string]string{"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.certificates": string(other.caPEM),
			"ssl.keystore.location": keystore, "ssl.endpoint.identification.algorithm": ""})
		if err != nil {
			t.Fatal(err)
		}
		if got := handshake(t, addr, clients, c); got != "" {
			t.Fatalf("a handshake with an untrusted broker succeeded (client %q)", got)
		}
	})
}

func TestTLSStoresItCannotReadAreRefused(t *testing.T) {
	dir := t.TempDir()
	jks := filepath.Join(dir, "store.jks")
	if err := os.WriteFile(jks, []byte{0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2}, 0o600); err != nil {
		t.Fatal(err)
	}
	p := newPKI(t)
	encrypted := string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2, 3}}))
	for _, tc := range []struct {
		props map[string]string
		err   string
	}{
		{map[string]string{"security.protocol": "SSL", "ssl.truststore.type": "JKS", "ssl.truststore.location": jks}, "ssl.truststore.type JKS is not supported"},
		{map[string]string{"security.protocol": "SSL", "ssl.truststore.location": jks}, "is not PEM"},
		{map[string]string{"security.protocol": "SSL", "ssl.keystore.type": "PKCS12", "ssl.keystore.location": jks}, "ssl.keystore.type PKCS12 is not supported"},
		{map[string]string{"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": string(p.clientCert), "ssl.keystore.key": encrypted, "ssl.key.password": "x"}, "encrypted private keys are not supported"},
		{map[string]string{"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": string(p.clientCert)}, "want a certificate chain and a private key"},
		{map[string]string{"security.protocol": "SSL", "ssl.truststore.certificates": string(p.caPEM)}, "needs ssl.truststore.type=PEM"},
		{map[string]string{"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"}, "want https or empty"},
		{map[string]string{"security.protocol": "SSL", "ssl.keystore.key": string(p.clientKey)}, "without ssl.keystore.certificate.chain"},
	} {
		if _, err := FromProperties(tc.props); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: err = %v, want %q", tc.props, err, tc.err)
		}
	}
}
