package orderapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/concordhq/concord/services/order/apikey"
	"github.com/concordhq/concord/services/order/orderstore"
)

// Keys finds the key a request presents (orderstore.Store does).
type Keys interface {
	// Authenticate returns the key whose value key is;
	// orderstore.ErrUnknownKey when there is none or it was revoked.
	Authenticate(ctx context.Context, key string) (apikey.Key, error)
}

// realm names the protection space in WWW-Authenticate (RFC 6750).
const realm = `Bearer realm="concord-orders"`

// keyedHandler serves a request whose key was found and holds the scope
// the route needs.
type keyedHandler func(w http.ResponseWriter, r *http.Request, k apikey.Key)

// authorized runs next only for a request presenting a live key with
// scope: 401 without one (or with an unknown or revoked one), 403 when the
// key lacks the scope. Both come before the body is read, so a refused
// request stores nothing and reads nothing.
func (h *Handler) authorized(scope apikey.Scope, next keyedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		presented, ok := apikey.FromAuthorization(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", realm)
			writeJSON(w, http.StatusUnauthorized, apiError{Error: "an API key is required: Authorization: Bearer KEY", Field: "Authorization"})
			return
		}
		k, err := h.Keys.Authenticate(r.Context(), presented)
		switch {
		case errors.Is(err, orderstore.ErrUnknownKey):
			w.Header().Set("WWW-Authenticate", realm+`, error="invalid_token", error_description="unknown or revoked API key"`)
			writeJSON(w, http.StatusUnauthorized, apiError{Error: "unknown or revoked API key", Field: "Authorization"})
			return
		case err != nil:
			h.Log.ErrorContext(r.Context(), "authenticate API key", "err", err)
			writeJSON(w, http.StatusInternalServerError, apiError{Error: "could not check the API key; retry"})
			return
		}
		if !k.Allows(scope) {
			w.Header().Set("WWW-Authenticate", realm+`, error="insufficient_scope", scope="`+string(scope)+`"`)
			writeJSON(w, http.StatusForbidden, apiError{Error: "this API key lacks the scope " + string(scope), Scope: string(scope)})
			return
		}
		next(w, r, k)
	}
}
