// Package clientprops reads a Kafka client properties file, the
// --command-config of Apache's tools, into franz-go options: the security
// protocol, TLS trust and client certificates in PEM form, and the SASL
// PLAIN, SCRAM and OAUTHBEARER mechanisms with their JAAS login.
//
// It answers a property it cannot honour with an error naming it (a JKS
// keystore, the GSSAPI mechanism) rather than connecting without it, and a
// property it does not use with a warning, as Apache's clients warn about
// supplied configurations they do not know.
package clientprops

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/magiconair/properties"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Config is what the properties ask of the connection.
type Config struct {
	// Protocol is security.protocol, upper case; "" when the file does not
	// set it (the caller's own settings then stand).
	Protocol string
	TLS      *tls.Config    // for SSL and SASL_SSL
	SASL     sasl.Mechanism // for SASL_PLAINTEXT and SASL_SSL
	ClientID string
	Warnings []string // properties read but not used
}

// Load reads and interprets a properties file.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	props, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	c, err := FromProperties(props)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse reads the java.util.Properties format (key=value, key: value,
// comments, line continuations, escapes), without the ${} expansion
// java.util.Properties does not do either.
func Parse(b []byte) (map[string]string, error) {
	l := &properties.Loader{Encoding: properties.UTF8, DisableExpansion: true}
	p, err := l.LoadBytes(b)
	if err != nil {
		return nil, err
	}
	return p.Map(), nil
}

// used are the properties FromProperties reads; the file's
// bootstrap.servers is overridden by the brokers flag, as Apache's
// --bootstrap-server overrides it.
var used = map[string]bool{
	"security.protocol": true, "sasl.mechanism": true, "sasl.jaas.config": true, "client.id": true, "bootstrap.servers": true,
	"ssl.truststore.type": true, "ssl.truststore.location": true, "ssl.truststore.certificates": true, "ssl.truststore.password": true,
	"ssl.keystore.type": true, "ssl.keystore.location": true, "ssl.keystore.certificate.chain": true, "ssl.keystore.key": true,
	"ssl.keystore.password": true, "ssl.key.password": true, "ssl.endpoint.identification.algorithm": true,
	"sasl.oauthbearer.token.endpoint.url": true, "sasl.login.callback.handler.class": true,
}

// FromProperties interprets the properties.
func FromProperties(props map[string]string) (Config, error) {
	c := Config{ClientID: props["client.id"]}
	var unused []string
	for k := range props {
		if !used[k] {
			unused = append(unused, k)
		}
	}
	sort.Strings(unused)
	for _, k := range unused {
		c.Warnings = append(c.Warnings, fmt.Sprintf("the configuration '%s' was supplied but is not used by replay; it is ignored", k))
	}

	proto, set := props["security.protocol"]
	c.Protocol = strings.ToUpper(strings.TrimSpace(proto))
	if !set {
		// Without security.protocol Kafka's clients use PLAINTEXT; SSL or
		// SASL settings alone would be silently unused.
		for k := range props {
			if strings.HasPrefix(k, "ssl.") || strings.HasPrefix(k, "sasl.") {
				return c, fmt.Errorf("%s is set but security.protocol is not (PLAINTEXT by default): set security.protocol to SSL, SASL_PLAINTEXT or SASL_SSL", k)
			}
		}
		return c, nil
	}
	var useTLS, useSASL bool
	switch c.Protocol {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return c, fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", proto)
	}
	if useTLS {
		t, err := tlsConfig(props)
		if err != nil {
			return c, err
		}
		c.TLS = t
	}
	if useSASL {
		m, err := saslMechanism(props)
		if err != nil {
			return c, err
		}
		c.SASL = m
	}
	return c, nil
}

// Opts are the franz-go options of the config (no seed brokers).
func (c Config) Opts() []kgo.Opt {
	var opts []kgo.Opt
	if c.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.TLS))
	}
	if c.SASL != nil {
		opts = append(opts, kgo.SASL(c.SASL))
	}
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	return opts
}

func tlsConfig(props map[string]string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}

	trustPEM, err := storePEM(props, "ssl.truststore", "ssl.truststore.certificates")
	if err != nil {
		return nil, err
	}
	if trustPEM != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(trustPEM) {
			return nil, fmt.Errorf("ssl.truststore: no PEM certificate found")
		}
		cfg.RootCAs = pool
	}

	keyPEM, err := storePEM(props, "ssl.keystore", "ssl.keystore.certificate.chain")
	if err != nil {
		return nil, err
	}
	if keyPEM != nil {
		if k := props["ssl.keystore.key"]; k != "" {
			keyPEM = append(append(keyPEM, '\n'), k...)
		}
		cert, err := keyPair(keyPEM)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	} else if props["ssl.keystore.key"] != "" {
		return nil, fmt.Errorf("ssl.keystore.key is set without ssl.keystore.certificate.chain")
	}

	// An empty ssl.endpoint.identification.algorithm turns off the host
	// name check, not the check of the chain.
	if alg, ok := props["ssl.endpoint.identification.algorithm"]; ok {
		switch strings.ToLower(strings.TrimSpace(alg)) {
		case "https":
		case "":
			roots := cfg.RootCAs
			cfg.InsecureSkipVerify = true // replaced by the chain check below
			cfg.VerifyConnection = func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return fmt.Errorf("the broker presented no certificate")
				}
				inter := x509.NewCertPool()
				for _, c := range cs.PeerCertificates[1:] {
					inter.AddCert(c)
				}
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
				return err
			}
		default:
			return nil, fmt.Errorf("ssl.endpoint.identification.algorithm %q: want https or empty", alg)
		}
	}
	return cfg, nil
}

// storePEM returns the PEM of a trust or key store: the inline property
// (ssl.truststore.certificates, ssl.keystore.certificate.chain) or the
// file at <prefix>.location. Only the PEM type is read: JKS and PKCS12
// stores are refused with the conversion to use.
func storePEM(props map[string]string, prefix, inline string) ([]byte, error) {
	typ := strings.ToUpper(strings.TrimSpace(props[prefix+".type"]))
	loc := props[prefix+".location"]
	text := props[inline]
	if loc == "" && text == "" {
		return nil, nil
	}
	if loc != "" && text != "" {
		return nil, fmt.Errorf("%s.location and %s are both set: give one", prefix, inline)
	}
	if typ != "" && typ != "PEM" {
		return nil, fmt.Errorf("%s.type %s is not supported: convert the store to PEM (e.g. keytool -exportcert -rfc, openssl pkcs12 -nodes) and set %s.type=PEM", prefix, typ, prefix)
	}
	if text != "" {
		if typ == "" {
			return nil, fmt.Errorf("%s needs %s.type=PEM", inline, prefix)
		}
		return []byte(text), nil
	}
	b, err := os.ReadFile(loc)
	if err != nil {
		return nil, fmt.Errorf("%s.location: %w", prefix, err)
	}
	if blk, _ := pem.Decode(b); blk == nil {
		// Kafka's default store type is JKS; a file that is not PEM is
		// most likely one.
		return nil, fmt.Errorf("%s.location %s is not PEM: JKS and PKCS12 stores are not supported; convert it to PEM and set %s.type=PEM", prefix, loc, prefix)
	}
	return b, nil
}

func keyPair(b []byte) (tls.Certificate, error) {
	var certs, keys []byte
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		switch {
		case blk.Type == "CERTIFICATE":
			certs = append(certs, pem.EncodeToMemory(blk)...)
		case blk.Type == "ENCRYPTED PRIVATE KEY" || blk.Headers["Proc-Type"] != "":
			return tls.Certificate{}, fmt.Errorf("ssl.keystore: encrypted private keys are not supported; decrypt it (openssl pkcs8 -nocrypt) and drop ssl.key.password")
		case strings.HasSuffix(blk.Type, "PRIVATE KEY"):
			keys = append(keys, pem.EncodeToMemory(blk)...)
		}
	}
	if certs == nil || keys == nil {
		return tls.Certificate{}, fmt.Errorf("ssl.keystore: want a certificate chain and a private key in PEM")
	}
	cert, err := tls.X509KeyPair(certs, keys)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("ssl.keystore: %w", err)
	}
	return cert, nil
}

func saslMechanism(props map[string]string) (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(props["sasl.mechanism"]))
	if mech == "" {
		mech = "GSSAPI" // Kafka's default
	}
	var wantModule string
	switch mech {
	case "PLAIN":
		wantModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		wantModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
	case "OAUTHBEARER":
		wantModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
	default:
		return nil, fmt.Errorf("sasl.mechanism %s is not supported: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", mech)
	}
	jaas, ok := props["sasl.jaas.config"]
	if !ok {
		return nil, fmt.Errorf("sasl.mechanism %s needs sasl.jaas.config (%s required username=\"…\" password=\"…\";)", mech, wantModule)
	}
	login, err := ParseJAAS(jaas)
	if err != nil {
		return nil, fmt.Errorf("sasl.jaas.config: %w", err)
	}
	if login.Module != wantModule {
		return nil, fmt.Errorf("sasl.jaas.config: login module %s does not go with sasl.mechanism %s (want %s)", login.Module, mech, wantModule)
	}
	if mech == "OAUTHBEARER" {
		return oauthBearer(props["sasl.oauthbearer.token.endpoint.url"], login.Options)
	}
	user, pass := login.Options["username"], login.Options["password"]
	if user == "" || pass == "" {
		return nil, fmt.Errorf("sasl.jaas.config: username and password are required")
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
}

// Login is one JAAS login module entry.
type Login struct {
	Module  string
	Flag    string
	Options map[string]string
}

// ParseJAAS reads a single-entry sasl.jaas.config as Kafka's JaasConfig
// does: "<module class> <required|requisite|sufficient|optional>
// key=value …;" where a value is a word or a double-quoted string with
// backslash escapes.
func ParseJAAS(s string) (Login, error) {
	toks, err := jaasTokens(s)
	if err != nil {
		return Login{}, err
	}
	if len(toks) < 3 || toks[len(toks)-1] != sep(";") || toks[0].sep || toks[1].sep {
		return Login{}, fmt.Errorf("want \"<LoginModule> required key=value …;\", got %q", s)
	}
	l := Login{Module: toks[0].text, Flag: strings.ToLower(toks[1].text), Options: map[string]string{}}
	switch l.Flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return Login{}, fmt.Errorf("login module control flag %q: want required, requisite, sufficient or optional", toks[1].text)
	}
	rest := toks[2 : len(toks)-1]
	for i := 0; i < len(rest); i += 3 {
		if i+2 >= len(rest) || rest[i].sep || rest[i+1] != sep("=") || rest[i+2].sep {
			return Login{}, fmt.Errorf("option %d of the login module: want key=value", i/3+1)
		}
		l.Options[rest[i].text] = rest[i+2].text
	}
	return l, nil
}

// token is a word or quoted string, or (sep) a "=" or ";".
type token struct {
	text string
	sep  bool
}

func sep(s string) token { return token{s, true} }

// jaasTokens splits on blanks into words, "=", ";" and quoted strings.
func jaasTokens(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '=' || c == ';':
			toks = append(toks, sep(string(c)))
			i++
		case c == '"' || c == '\'':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
					switch s[j] {
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					default:
						b.WriteByte(s[j])
					}
					continue
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated quoted value in %q", s)
			}
			toks = append(toks, token{text: b.String()})
			i = j + 1
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n\r=;\"'", rune(s[j])) {
				j++
			}
			toks = append(toks, token{text: s[i:j]})
			i = j
		}
	}
	return toks, nil
}
