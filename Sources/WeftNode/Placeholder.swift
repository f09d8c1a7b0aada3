enum WeftNodePlaceholder {}
