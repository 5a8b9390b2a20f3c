package lane

// Ship is an Urbit identity: an unsigned integer of up to 128 bits, held as
// two 64-bit halves. The zero value is ~zod. Ship is comparable and holds no
// pointers, so it can key maps and sit in pointer-free tables.
type Ship struct {
	Hi uint64 // bits 64-127
	Lo uint64 // bits 0-63
}

// ShipFromUint64 returns the ship whose number is n.
func ShipFromUint64(n uint64) Ship { return Ship{Lo: n} }
