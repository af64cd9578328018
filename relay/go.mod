module github.com/concordhq/concord/relay

go 1.26
