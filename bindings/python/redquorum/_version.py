"""The package version: the build checks it against the crate's, the import against the
library's."""

__version__ = "1.0.0"
