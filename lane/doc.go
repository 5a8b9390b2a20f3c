// Package lane holds the identities the relay routes by: ships (128-bit Urbit
// addresses, printed as @p), their classes and sponsorship chains, and lanes
// (the UDP address and port at which a ship is reached).
package lane
