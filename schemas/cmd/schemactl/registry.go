package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/sr"
)

// registryFlags are the connection flags every registry verb shares, each
// with an environment fallback so CI can hold the secrets.
type registryFlags struct {
	url, user, password, token *string
	caFile, certFile, keyFile  *string
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func addRegistryFlags(fl *flag.FlagSet) *registryFlags {
	return &registryFlags{
		url: fl.String("registry", envOr("SCHEMA_REGISTRY_URL", ""),
			"schema registry URL, e.g. https://registry:8081 (env SCHEMA_REGISTRY_URL)"),
		user: fl.String("registry-user", os.Getenv("CONCORD_SCHEMA_REGISTRY_USER"),
			"user for HTTP basic authentication (env CONCORD_SCHEMA_REGISTRY_USER)"),
		password: fl.String("registry-password", os.Getenv("CONCORD_SCHEMA_REGISTRY_PASSWORD"),
			"password for HTTP basic authentication; prefer the environment (env CONCORD_SCHEMA_REGISTRY_PASSWORD)"),
		token: fl.String("registry-token", os.Getenv("CONCORD_SCHEMA_REGISTRY_TOKEN"),
			"bearer token, sent as \"Authorization: Bearer TOKEN\" (env CONCORD_SCHEMA_REGISTRY_TOKEN)"),
		caFile: fl.String("registry-ca-file", os.Getenv("CONCORD_SCHEMA_REGISTRY_CA_FILE"),
			"PEM file of the CAs that sign the registry's certificate; default: the system's (env CONCORD_SCHEMA_REGISTRY_CA_FILE)"),
		certFile: fl.String("registry-cert-file", os.Getenv("CONCORD_SCHEMA_REGISTRY_CERT_FILE"),
			"PEM client certificate for mutual TLS, with --registry-key-file (env CONCORD_SCHEMA_REGISTRY_CERT_FILE)"),
		keyFile: fl.String("registry-key-file", os.Getenv("CONCORD_SCHEMA_REGISTRY_KEY_FILE"),
			"PEM private key of --registry-cert-file (env CONCORD_SCHEMA_REGISTRY_KEY_FILE)"),
	}
}

// client builds the registry client the flags describe. Every mistake in
// them is a usage error that names the flag.
func (r *registryFlags) client() (*sr.Client, error) {
	if *r.url == "" {
		return nil, usagef("--registry URL is required (or SCHEMA_REGISTRY_URL)")
	}
	opts := []sr.ClientOpt{sr.URLs(*r.url), sr.UserAgent("concord-schemactl")}
	switch {
	case *r.token != "" && (*r.user != "" || *r.password != ""):
		return nil, usagef("--registry-token and --registry-user/--registry-password are exclusive: use one authentication")
	case *r.token != "":
		opts = append(opts, sr.BearerToken(*r.token))
	case *r.user != "":
		opts = append(opts, sr.BasicAuth(*r.user, *r.password))
	case *r.password != "":
		return nil, usagef("--registry-password needs --registry-user")
	}
	tlsCfg, err := r.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		opts = append(opts, sr.DialTLSConfig(tlsCfg))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, usageError{fmt.Errorf("registry client: %w", err)}
	}
	return cl, nil
}

// tlsConfig is nil when no TLS flag is set: https URLs then use the
// system's roots.
func (r *registryFlags) tlsConfig() (*tls.Config, error) {
	if *r.caFile == "" && *r.certFile == "" && *r.keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if *r.caFile != "" {
		pem, err := os.ReadFile(*r.caFile)
		if err != nil {
			return nil, usagef("--registry-ca-file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--registry-ca-file %s: no PEM certificate in it", *r.caFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case *r.certFile != "" && *r.keyFile == "":
		return nil, usagef("--registry-cert-file needs --registry-key-file")
	case *r.certFile == "" && *r.keyFile != "":
		return nil, usagef("--registry-key-file needs --registry-cert-file")
	case *r.certFile != "":
		pair, err := tls.LoadX509KeyPair(*r.certFile, *r.keyFile)
		if err != nil {
			return nil, usagef("--registry-cert-file/--registry-key-file: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
