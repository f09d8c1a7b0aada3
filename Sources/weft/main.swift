print("weft")
