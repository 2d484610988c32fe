module crosslanguage/lock

go 1.22

require github.com/redquorum/redquorum/bindings/go v0.0.0

replace github.com/redquorum/redquorum/bindings/go => ../../../../go
