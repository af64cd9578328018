module github.com/concordhq/concord/consumers

go 1.26
