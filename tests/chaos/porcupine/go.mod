module github.com/redlock-rs/redlock/tests/chaos/porcupine

go 1.19

require github.com/anishathalye/porcupine v1.3.1
