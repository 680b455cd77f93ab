"""A monitor's HTTP API: its routes, the bodies they take, its change feeds and difference images."""
