package relay

// PrefetchedTaken returns how many keys computed by Prefetch since o's
// last Reset Handle has taken instead of hashing again (for tests).
func (o *Reader) PrefetchedTaken() int { return o.preNext }
