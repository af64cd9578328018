module github.com/concordhq/concord/schemas

go 1.26

require (
	github.com/google/uuid v1.6.0
	github.com/linkedin/goavro/v2 v2.15.0
	github.com/santhosh-tekuri/jsonschema/v5 v5.3.1
	github.com/twmb/franz-go/pkg/sr v1.8.0
)

require github.com/golang/snappy v0.0.1 // indirect

replace github.com/concordhq/concord/infra => ../infra

replace github.com/concordhq/concord/relay => ../relay

replace github.com/concordhq/concord/consumers => ../consumers

replace github.com/concordhq/concord/services => ../services
