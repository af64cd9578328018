module github.com/concordhq/concord/schemas

go 1.26

require (
	github.com/google/uuid v1.6.0
	github.com/santhosh-tekuri/jsonschema/v5 v5.3.1
)
