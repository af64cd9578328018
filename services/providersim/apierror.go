package providersim

import (
	"encoding/json"
	"net/http"
)

// Stripe's error types, as they appear in the "type" field of an error object.
const (
	errTypeInvalidRequest = "invalid_request_error"
	errTypeAPI            = "api_error"
	errTypeCard           = "card_error"
	errTypeIdempotency    = "idempotency_error"
)

// apiError is Stripe's error object. It is rendered as {"error": {...}} with
// the HTTP status beside it; a card error also carries the PaymentIntent it
// happened on, as Stripe does.
type apiError struct {
	Status        int             `json:"-"`
	Type          string          `json:"type"`
	Code          string          `json:"code,omitempty"`
	DeclineCode   string          `json:"decline_code,omitempty"`
	Message       string          `json:"message"`
	Param         string          `json:"param,omitempty"`
	PaymentIntent json.RawMessage `json:"payment_intent,omitempty"`
	DocURL        string          `json:"doc_url,omitempty"`
}

func (e *apiError) response() response {
	body, err := json.Marshal(struct {
		Error *apiError `json:"error"`
	}{e})
	if err != nil { // cannot happen: every field marshals
		return response{status: http.StatusInternalServerError, body: []byte(`{"error":{"type":"api_error","message":"error encoding failed"}}`)}
	}
	return response{status: e.Status, body: body}
}

func invalidRequest(code, param, msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: errTypeInvalidRequest, Code: code, Param: param, Message: msg}
}

func missingParam(param string) *apiError {
	return invalidRequest("parameter_missing", param, "Missing required param: "+param+".")
}

func notFound(param, kind, id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: errTypeInvalidRequest, Code: "resource_missing", Param: param,
		Message: "No such " + kind + ": '" + id + "'"}
}

func unexpectedState(msg string) *apiError {
	return invalidRequest("payment_intent_unexpected_state", "", msg)
}

// response is what a handler produces: the simulator buffers it so it can be
// stored for idempotent replay, or withheld by the hang fault.
type response struct {
	status int
	body   []byte
}

func jsonResponse(status int, v any) response {
	body, err := json.Marshal(v)
	if err != nil {
		return (&apiError{Status: http.StatusInternalServerError, Type: errTypeAPI, Message: "encoding response: " + err.Error()}).response()
	}
	return response{status: status, body: body}
}
