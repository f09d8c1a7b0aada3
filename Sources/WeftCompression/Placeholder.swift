enum WeftCompressionPlaceholder {}
