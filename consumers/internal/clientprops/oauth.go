package clientprops

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// oauthBearer is the OAUTHBEARER mechanism of Kafka's login module: with
// sasl.oauthbearer.token.endpoint.url, a token fetched with the OAuth
// client-credentials grant (the JAAS options clientId, clientSecret and
// scope, KIP-768); without it, Kafka's unsecured development token whose
// subject is unsecuredLoginStringClaim_sub. JAAS options extension_NAME
// are sent as SASL extensions.
func oauthBearer(endpoint string, opts map[string]string) (sasl.Mechanism, error) {
	ext := map[string]string{}
	for k, v := range opts {
		if name, ok := strings.CutPrefix(k, "extension_"); ok {
			ext[name] = v
		}
	}
	if endpoint == "" {
		sub := opts["unsecuredLoginStringClaim_sub"]
		if sub == "" {
			return nil, fmt.Errorf("sasl.mechanism OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url (with clientId and clientSecret in sasl.jaas.config) or, for an unsecured development broker, unsecuredLoginStringClaim_sub")
		}
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			return oauth.Auth{Token: unsecuredToken(sub, time.Now()), Extensions: ext}, nil
		}), nil
	}
	id, secret := opts["clientId"], opts["clientSecret"]
	if id == "" || secret == "" {
		return nil, fmt.Errorf("sasl.jaas.config: clientId and clientSecret are required with sasl.oauthbearer.token.endpoint.url")
	}
	cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: endpoint, AuthStyle: oauth2.AuthStyleInHeader}
	if scope := opts["scope"]; scope != "" {
		cc.Scopes = strings.Fields(scope)
	}
	// The token source caches the token and fetches a new one when it
	// expires, so every connection authenticates with a valid token.
	src := cc.TokenSource(context.Background())
	return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		tok, err := src.Token()
		if err != nil {
			return oauth.Auth{}, fmt.Errorf("fetch an OAuth token from %s: %w", endpoint, err)
		}
		return oauth.Auth{Token: tok.AccessToken, Extensions: ext}, nil
	}), nil
}

// unsecuredToken is the unsigned JWT Kafka's unsecured login callback
// builds: alg none, the subject, issued now, valid for an hour.
func unsecuredToken(sub string, now time.Time) string {
	enc := base64.RawURLEncoding
	header, _ := json.Marshal(map[string]string{"alg": "none"})
	claims, _ := json.Marshal(map[string]any{"sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	return enc.EncodeToString(header) + "." + enc.EncodeToString(claims) + "."
}
