module github.com/redlock-rs/redlock/bindings/go

go 1.22
