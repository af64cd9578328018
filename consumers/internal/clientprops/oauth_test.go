package clientprops

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

const oauthModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

// firstMessage is what the client sends the broker first: the GS2 header,
// then "auth=Bearer <token>" and the extensions, separated by 0x01.
func firstMessage(t *testing.T, c Config) string {
	t.Helper()
	if c.SASL == nil || c.SASL.Name() != "OAUTHBEARER" {
		t.Fatalf("mechanism %v, want OAUTHBEARER", c.SASL)
	}
	_, msg, err := c.SASL.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	return string(msg)
}

func TestOAuthBearerFetchesAClientCredentialsToken(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		id, secret, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || !ok || id != "replay" || secret != "s3cret" ||
			r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("scope") != "kafka admin" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"tok-123","token_type":"Bearer","expires_in":3600}`))
	}))
	defer srv.Close()
	props := map[string]string{
		"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
		"sasl.oauthbearer.token.endpoint.url": srv.URL,
		"sasl.login.callback.handler.class":   "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
		"sasl.jaas.config":                    oauthModule + ` required clientId="replay" clientSecret="s3cret" scope="kafka admin" extension_logicalCluster="lkc-1";`,
	}
	c, err := FromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	msg := firstMessage(t, c)
	if !strings.Contains(msg, "\x01auth=Bearer tok-123\x01") || !strings.Contains(msg, "\x01logicalCluster=lkc-1\x01") {
		t.Errorf("first message %q lacks the token or the extension", msg)
	}
	firstMessage(t, c) // a second connection reuses the unexpired token
	if n := calls.Load(); n != 1 {
		t.Errorf("%d token requests for two connections, want 1", n)
	}

	props["sasl.jaas.config"] = oauthModule + ` required clientId="replay" clientSecret="wrong";`
	c, err = FromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.SASL.Authenticate(context.Background(), "broker:9092"); err == nil || !strings.Contains(err.Error(), "fetch an OAuth token") {
		t.Errorf("a refused token request: %v", err)
	}
	props["sasl.jaas.config"] = oauthModule + ` required clientId="replay";`
	if _, err := FromProperties(props); err == nil || !strings.Contains(err.Error(), "clientId and clientSecret are required") {
		t.Errorf("no client secret: %v", err)
	}
}

func TestOAuthBearerUnsecuredToken(t *testing.T) {
	c, err := FromProperties(map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
		"sasl.jaas.config": oauthModule + ` required unsecuredLoginStringClaim_sub="alice";`})
	if err != nil {
		t.Fatal(err)
	}
	msg := firstMessage(t, c)
	_, after, ok := strings.Cut(msg, "auth=Bearer ")
	if !ok {
		t.Fatalf("no token in %q", msg)
	}
	tok, _, _ := strings.Cut(after, "\x01")
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[2] != "" {
		t.Fatalf("token %q is not an unsigned JWT", tok)
	}
	var claims struct {
		Sub string `json:"sub"`
		Iat int64  `json:"iat"`
		Exp int64  `json:"exp"`
	}
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(b, &claims); err != nil || claims.Sub != "alice" || claims.Exp-claims.Iat != 3600 {
		t.Errorf("claims %s: %+v %v", b, claims, err)
	}
	if _, err := FromProperties(map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
		"sasl.jaas.config": oauthModule + ` required;`}); err == nil || !strings.Contains(err.Error(), "token.endpoint.url") {
		t.Errorf("neither endpoint nor subject: %v", err)
	}
}
