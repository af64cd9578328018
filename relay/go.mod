module github.com/concordhq/concord/relay

go 1.26

replace github.com/concordhq/concord/infra => ../infra

replace github.com/concordhq/concord/schemas => ../schemas

replace github.com/concordhq/concord/consumers => ../consumers

replace github.com/concordhq/concord/services => ../services
