module github.com/redquorum/redquorum/bindings/go

go 1.22
