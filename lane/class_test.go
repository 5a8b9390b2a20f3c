package lane

import (
	"errors"
	"slices"
	"testing"
)

func mustShip(t testing.TB, s string) Ship {
	t.Helper()
	ship, err := ParseShip(s)
	if err != nil {
		t.Fatal(err)
	}
	return ship
}

func TestClass(t *testing.T) {
	for _, v := range []struct {
		s    Ship
		want Class
	}{
		{ShipFromUint64(0), Galaxy},
		{ShipFromUint64(255), Galaxy},
		{ShipFromUint64(256), Star},
		{ShipFromUint64(65535), Star},
		{ShipFromUint64(65536), Planet},
		{ShipFromUint64(1<<32 - 1), Planet},
		{ShipFromUint64(1 << 32), Moon},
		{ShipFromUint64(1<<64 - 1), Moon},
		{Ship{Hi: 1}, Comet},
		{Ship{Hi: ^uint64(0), Lo: ^uint64(0)}, Comet},
	} {
		if got := v.s.Class(); got != v.want {
			t.Errorf("%s.Class() = %s, want %s", v.s.Decimal(), got, v.want)
		}
	}
	names := map[Class]string{Galaxy: "galaxy", Star: "star", Planet: "planet", Moon: "moon", Comet: "comet", 9: "Class(9)"}
	for c, want := range names {
		if got := c.String(); got != want {
			t.Errorf("Class(%d).String() = %q, want %q", uint8(c), got, want)
		}
	}
}

func TestSponsor(t *testing.T) {
	for _, v := range []struct{ ship, sponsor string }{
		{"~zod", "~zod"},
		{"~nec", "~nec"},
		{"~marzod", "~zod"},
		{"~marnec", "~nec"},
		{"~fassec", "~sec"},
		{"~nidsut-tomdun", "~marzod"},
		{"~sansym-ribnux", "~marnec"},
		{"~sampel-palnet", "~talpur"},
		{"~doznec-sampel-palnet", "~sampel-palnet"},
		// Hoon's +sein: a comet's sponsor is its low 16 bits (a star here),
		// not ~zod as urbit-ob says.
		{"~dozryt--wolmep-racmyl-padpeg-mocryp", "~mocryp"},
	} {
		s := mustShip(t, v.ship)
		if got := s.Sponsor().String(); got != v.sponsor {
			t.Errorf("sein(%s) = %s, want %s", v.ship, got, v.sponsor)
		}
	}
}

func TestAppendChain(t *testing.T) {
	for _, v := range []struct {
		ship  Ship
		chain []string
	}{
		{mustShip(t, "~zod"), []string{"~zod"}},
		{mustShip(t, "~marnec"), []string{"~marnec", "~nec"}},
		{mustShip(t, "~sampel-palnet"), []string{"~sampel-palnet", "~talpur", "~pur"}},
		{mustShip(t, "~doznec-sampel-palnet"), []string{"~doznec-sampel-palnet", "~sampel-palnet", "~talpur", "~pur"}},
		{mustShip(t, "~dozryt--wolmep-racmyl-padpeg-mocryp"), []string{"~dozryt--wolmep-racmyl-padpeg-mocryp", "~mocryp", "~ryp"}},
		// A planet whose low 16 bits are a galaxy skips the star level.
		{ShipFromUint64(0x10005), []string{ShipFromUint64(0x10005).String(), "~per"}},
		// A comet whose low 16 bits are a galaxy.
		{Ship{Hi: 1, Lo: 0x0100000000000007}, []string{Ship{Hi: 1, Lo: 0x0100000000000007}.String(), "~let"}},
	} {
		var got []string
		for _, s := range v.ship.AppendChain(nil) {
			got = append(got, s.String())
		}
		if !slices.Equal(got, v.chain) {
			t.Errorf("chain of %s = %v, want %v", v.ship, got, v.chain)
		}
	}
	dst := make([]Ship, 0, MaxChainLen)
	s := mustShip(t, "~doznec-sampel-palnet")
	if n := testing.AllocsPerRun(100, func() { dst = s.AppendChain(dst[:0]) }); n != 0 {
		t.Errorf("AppendChain: %v allocs per run, want 0", n)
	}
}

func TestSponsorsOverrides(t *testing.T) {
	var sp Sponsors
	planet := mustShip(t, "~sampel-palnet")
	moon := mustShip(t, "~doznec-sampel-palnet")
	newStar := mustShip(t, "~marnec")
	if err := sp.Set(planet, newStar); err != nil {
		t.Fatal(err)
	}
	if got := sp.Sponsor(planet); got != newStar {
		t.Errorf("Sponsor(planet) = %s, want %s", got, newStar)
	}
	if got := sp.Sponsor(newStar); got != mustShip(t, "~nec") {
		t.Errorf("default applies to ships without overrides; got %s", got)
	}
	want := []Ship{moon, planet, newStar, mustShip(t, "~nec")}
	if got := sp.AppendChain(nil, moon); !slices.Equal(got, want) {
		t.Errorf("chain = %v, want %v", got, want)
	}
	// A star escaping to another galaxy, and a planet sponsored directly by
	// a galaxy.
	if err := sp.Set(newStar, mustShip(t, "~zod")); err != nil {
		t.Fatal(err)
	}
	want = []Ship{moon, planet, newStar, mustShip(t, "~zod")}
	if got := sp.AppendChain(nil, moon); !slices.Equal(got, want) {
		t.Errorf("chain = %v, want %v", got, want)
	}
	if err := sp.Set(planet, mustShip(t, "~bus")); err != nil {
		t.Fatal(err)
	}
	want = []Ship{moon, planet, mustShip(t, "~bus")}
	if got := sp.AppendChain(nil, moon); !slices.Equal(got, want) {
		t.Errorf("chain = %v, want %v", got, want)
	}
	if sp.Len() != 2 {
		t.Errorf("Len = %d, want 2", sp.Len())
	}

	// Overrides that would not lower the class are refused, so cycles
	// cannot be built.
	otherPlanet := mustShip(t, "~dapnep-ronmyl")
	for _, bad := range []struct{ ship, sponsor Ship }{
		{mustShip(t, "~zod"), mustShip(t, "~nec")},       // galaxy
		{planet, otherPlanet},                            // same class
		{newStar, planet},                                // lower rank
		{newStar, newStar},                               // itself
		{planet, moon},                                   // its own moon
		{otherPlanet, otherPlanet},                       // itself
		{mustShip(t, "~marzod"), mustShip(t, "~marnec")}, // star by star
	} {
		if err := sp.Set(bad.ship, bad.sponsor); !errors.Is(err, ErrBadSponsor) {
			t.Errorf("Set(%s, %s) = %v, want ErrBadSponsor", bad.ship, bad.sponsor, err)
		}
	}
	if sp.Len() != 2 {
		t.Errorf("refused Sets changed the table: Len = %d", sp.Len())
	}

	c := sp.Clone()
	sp.Delete(planet)
	if got := sp.Sponsor(planet); got != planet.Sponsor() {
		t.Errorf("after Delete, Sponsor = %s, want default %s", got, planet.Sponsor())
	}
	if got := c.Sponsor(planet); got != mustShip(t, "~bus") {
		t.Errorf("Clone shares state: Sponsor = %s", got)
	}

	var nilTable *Sponsors
	if got := nilTable.AppendChain(nil, moon); !slices.Equal(got, moon.AppendChain(nil)) {
		t.Errorf("nil table chain = %v", got)
	}
	if nilTable.Len() != 0 || nilTable.Clone().Len() != 0 {
		t.Error("nil table is not empty")
	}
	nilTable.Delete(planet) // must not panic
}

// TestSponsorsChainBounded feeds AppendChain a table that bypasses Set's
// check and holds a cycle; the chain must stay bounded.
func TestSponsorsChainBounded(t *testing.T) {
	a, b := mustShip(t, "~sampel-palnet"), mustShip(t, "~dapnep-ronmyl")
	sp := Sponsors{override: map[Ship]Ship{a: b, b: a}}
	got := sp.AppendChain(nil, a)
	if len(got) > MaxChainLen || len(got) == 0 || got[0] != a {
		t.Errorf("chain through a cycle = %v", got)
	}
}

func TestSponsorsConcurrentReads(t *testing.T) {
	var sp Sponsors
	if err := sp.Set(mustShip(t, "~sampel-palnet"), mustShip(t, "~marnec")); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			dst := make([]Ship, 0, MaxChainLen)
			for range 1000 {
				dst = sp.AppendChain(dst[:0], mustShip(t, "~doznec-sampel-palnet"))
			}
		}()
	}
	for range 4 {
		<-done
	}
}

func BenchmarkSponsorsAppendChain(b *testing.B) {
	var sp Sponsors
	if err := sp.Set(mustShip(b, "~sampel-palnet"), mustShip(b, "~marnec")); err != nil {
		b.Fatal(err)
	}
	moon := mustShip(b, "~doznec-sampel-palnet")
	dst := make([]Ship, 0, MaxChainLen)
	b.ReportAllocs()
	for b.Loop() {
		dst = sp.AppendChain(dst[:0], moon)
	}
}
