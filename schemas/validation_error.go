package schemas

import (
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// ValidationError says which part of an event broke which rule.
type ValidationError struct {
	EventType    string
	EventVersion int
	Pointer      string // JSON pointer into the event, "" for the root
	Rule         string // the schema keyword that failed, e.g. required, minimum, format
	Message      string
}

func (e *ValidationError) Error() string {
	ptr := e.Pointer
	if ptr == "" {
		ptr = "/"
	}
	if e.EventType != "" {
		return fmt.Sprintf("%s v%d: %s: %s: %s", e.EventType, e.EventVersion, ptr, e.Rule, e.Message)
	}
	return fmt.Sprintf("%s: %s: %s", ptr, e.Rule, e.Message)
}

// newValidationError reduces jsonschema's error tree to one leaf: the
// failure an operator should fix first. jsonschema orders the causes of an
// object by map iteration, so "first leaf" would change from run to run
// when an event breaks several rules; the leaf with the shortest keyword
// location (the rule nearest the root of the schema, e.g. a wrong
// event_version const before anything inside data), ties broken by name,
// is the same every time.
func newValidationError(typ string, ver int, ve *jsonschema.ValidationError) *ValidationError {
	var leaf *jsonschema.ValidationError
	var visit func(e *jsonschema.ValidationError)
	visit = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			if leaf == nil || len(e.KeywordLocation) < len(leaf.KeywordLocation) ||
				(len(e.KeywordLocation) == len(leaf.KeywordLocation) && e.KeywordLocation < leaf.KeywordLocation) {
				leaf = e
			}
			return
		}
		for _, c := range e.Causes {
			visit(c)
		}
	}
	visit(ve)
	rule := leaf.KeywordLocation
	if i := strings.LastIndex(rule, "/"); i >= 0 {
		rule = rule[i+1:]
	}
	return &ValidationError{EventType: typ, EventVersion: ver, Pointer: leaf.InstanceLocation, Rule: rule, Message: leaf.Message}
}
