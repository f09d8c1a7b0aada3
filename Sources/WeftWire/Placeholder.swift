enum WeftWirePlaceholder {}
