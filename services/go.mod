module github.com/concordhq/concord/services

go 1.26
