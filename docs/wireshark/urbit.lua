-- urbit.lua: a Wireshark dissector for Urbit's UDP packets, mesa (directed
-- messaging) and legacy ames. docs/wireshark/README.md says how to install
-- and use it.
--
-- Contract. A datagram is mesa when it has 8 or more bytes and the mesa
-- cookie (00 02 e0 67) at bytes 4-7, else legacy ames; both are parsed with
-- the checks of the relay's scry package (Packet.Parse, AmesPacket.Parse),
-- which are vere's, in vere's order. Every field is named
-- urbit.<protocol>.<key>: <protocol> is the "protocol" of the report
-- `relay decode --json` prints for the same datagram (itself the field
-- urbit.protocol), <key> the dotted key path of a value in that report
-- ("head.hops", "name.ship", "data.pair" once per element, ...), and the
-- field holds that value. A few fields the report lacks are added
-- (README.md lists them): @p renderings of ships (<key>_patp, exactly as
-- lane.Ship.String prints them), mesa head.reserved and name.path, legacy
-- header bits, ticks and content.
--
-- Registration. On the galaxy ports (UDP 13337-13592) every non-empty,
-- untruncated datagram is dissected, rejects included
-- (urbit.<protocol>.verdict == "reject" and .reason say why), except STUN,
-- which is left to Wireshark's STUN dissector: binding requests (as the
-- relay tells them, scry.IsSTUN) and STUN-shaped datagrams that do not
-- parse as legacy ames. On any other port a heuristic claims only
-- datagrams that parse as an accepted mesa packet (cookie, version 1,
-- every field in bounds, the 20-bit mug of the body, no trailing bytes) or
-- an accepted legacy packet (version 0, 20-bit mug, a whole prelude): about
-- one random datagram in 2^23 passes the latter.
--
-- Written for Wireshark 3.0 or later, tested with 4.0 (Lua 5.2); the
-- parsing and @p code runs the same under Lua 5.4. Numbers stay below
-- 2^53, so the arithmetic is exact whether Lua holds them as doubles or
-- integers; wider values (ships, fragment numbers) are word arrays.

local urbit = Proto("urbit", "Urbit (mesa and legacy ames)")

-- ---------------------------------------------------------------------
-- 32-bit arithmetic on Lua numbers.

local TWO32 = 4294967296

-- bxor: bit32's in Lua 5.2, the native operator in Lua 5.3 and 5.4 (which
-- newer Wireshark releases use), compiled with load so that Lua 5.2 never
-- parses it. Operands are integral and below 2^32.
local bxor
if bit32 then
  bxor = bit32.bxor
else
  bxor = load("return function(a, b) return math.tointeger(a) ~ math.tointeger(b) end")()
end

local function shr(a, n) return math.floor(a / 2 ^ n) end

local function rotl32(a, n)
  local hi = math.floor(a / 2 ^ (32 - n))
  return (a * 2 ^ n) % TWO32 + hi
end

-- mul32 is a*b mod 2^32 for a, b below 2^32, split so that no partial
-- product exceeds 2^53.
local function mul32(a, b)
  local alo, ahi = a % 65536, math.floor(a / 65536)
  local blo, bhi = b % 65536, math.floor(b / 65536)
  local mid = (ahi * blo + alo * bhi) % 65536
  return (mid * 65536 + alo * blo) % TWO32
end

-- murmur3 is MurmurHash3_x86_32 of the n bytes of s from position first
-- (1-based).
local function murmur3(s, first, n, seed)
  local C1, C2 = 0xcc9e2d51, 0x1b873593
  local h = seed
  local p = first
  for _ = 1, math.floor(n / 4) do
    local b1, b2, b3, b4 = s:byte(p, p + 3)
    local k = b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
    k = mul32(rotl32(mul32(k, C1), 15), C2)
    h = rotl32(bxor(h, k), 13)
    h = (h * 5 + 0xe6546b64) % TWO32
    p = p + 4
  end
  local rem = n % 4
  if rem > 0 then
    local k = s:byte(p)
    if rem >= 2 then k = k + s:byte(p + 1) * 256 end
    if rem == 3 then k = k + s:byte(p + 2) * 65536 end
    h = bxor(h, mul32(rotl32(mul32(k, C1), 15), C2))
  end
  h = bxor(h, n % TWO32)
  h = bxor(h, shr(h, 16))
  h = mul32(h, 0x85ebca6b)
  h = bxor(h, shr(h, 13))
  h = mul32(h, 0xc2b2ae35)
  return bxor(h, shr(h, 16))
end

-- mug is Urbit's 31-bit byte mug (scry.Mug): murmur3 seeded 0xcafebabe
-- folded to 31 bits, retried with the next seed while zero, 0x7fff after
-- eight zeros.
local function mug(s, first, n)
  for i = 0, 7 do
    local h = murmur3(s, first, n, 0xcafebabe + i)
    local m = bxor(shr(h, 31), h % 0x80000000)
    if m ~= 0 then return m end
  end
  return 0x7fff
end

-- crc32 is CRC-32 (IEEE) of the first n bytes of s, for STUN's FINGERPRINT.
local crcTable
local function crc32(s, n)
  if not crcTable then
    crcTable = {}
    for i = 0, 255 do
      local c = i
      for _ = 1, 8 do
        if c % 2 == 1 then c = bxor(shr(c, 1), 0xedb88320) else c = shr(c, 1) end
      end
      crcTable[i] = c
    end
  end
  local c = 0xffffffff
  for i = 1, n do
    c = bxor(crcTable[bxor(c % 256, s:byte(i))], shr(c, 8))
  end
  return bxor(c, 0xffffffff)
end

-- le reads an n-byte little-endian number (n <= 6, so exact) at 1-based p.
local function le(s, p, n)
  local v, mul = 0, 1
  for i = 0, n - 1 do
    v = v + s:byte(p + i) * mul
    mul = mul * 256
  end
  return v
end

-- ---------------------------------------------------------------------
-- Ships: 128-bit numbers as eight 16-bit words, least significant first
-- (lane.Ship).

local PREFIXES = "" ..
  "dozmarbinwansamlitsighidfidlissogdirwacsabwissib" ..
  "rigsoldopmodfoglidhopdardorlorhodfolrintogsilmir" ..
  "holpaslacrovlivdalsatlibtabhanticpidtorbolfosdot" ..
  "losdilforpilramtirwintadbicdifrocwidbisdasmidlop" ..
  "rilnardapmolsanlocnovsitnidtipsicropwitnatpanmin" ..
  "ritpodmottamtolsavposnapnopsomfinfonbanmorworsip" ..
  "ronnorbotwicsocwatdolmagpicdavbidbaltimtasmallig" ..
  "sivtagpadsaldivdactansidfabtarmonranniswolmispal" ..
  "lasdismaprabtobrollatlonnodnavfignomnibpagsopral" ..
  "bilhaddocridmocpacravripfaltodtiltinhapmicfanpat" ..
  "taclabmogsimsonpinlomrictapfirhasbosbatpochactid" ..
  "havsaplindibhosdabbitbarracparloddosbortochilmac" ..
  "tomdigfilfasmithobharmighinradmashalraglagfadtop" ..
  "mophabnilnosmilfopfamdatnoldinhatnacrisfotribhoc" ..
  "nimlarfitwalrapsarnalmoslandondanladdovrivbacpol" ..
  "laptalpitnambonrostonfodponsovnocsorlavmatmipfip"

local SUFFIXES = "" ..
  "zodnecbudwessevpersutletfulpensytdurwepserwylsun" ..
  "rypsyxdyrnuphebpeglupdepdysputlughecryttyvsydnex" ..
  "lunmeplutseppesdelsulpedtemledtulmetwenbynhexfeb" ..
  "pyldulhetmevruttylwydtepbesdexsefwycburderneppur" ..
  "rysrebdennutsubpetrulsynregtydsupsemwynrecmegnet" ..
  "secmulnymtevwebsummutnyxrextebfushepbenmuswyxsym" ..
  "selrucdecwexsyrwetdylmynmesdetbetbeltuxtugmyrpel" ..
  "syptermebsetdutdegtexsurfeltudnuxruxrenwytnubmed" ..
  "lytdusnebrumtynseglyxpunresredfunrevrefmectedrus" ..
  "bexlebduxrynnumpyxrygryxfeptyrtustyclegnemfermer" ..
  "tenlusnussyltecmexpubrymtucfyllepdebbermughuttun" ..
  "bylsudpemdevlurdefbusbeprunmelpexdytbyttyplevmyl" ..
  "wedducfurfexnulluclennerlexrupnedlecrydlydfenwel" ..
  "nydhusrelrudneshesfetdesretdunlernyrsebhulryllud" ..
  "remlysfynwerrycsugnysnyllyndyndemluxfedsedbecmun" ..
  "lyrtesmudnytbyrsenwegfyrmurtelreptegpecnelnevfes"

local function prefix(i) return PREFIXES:sub(3 * i + 1, 3 * i + 3) end
local function suffix(i) return SUFFIXES:sub(3 * i + 1, 3 * i + 3) end

-- words reads a little-endian number of n bytes (n <= 16) at 1-based p.
local function words(s, p, n)
  local w = { 0, 0, 0, 0, 0, 0, 0, 0 }
  for i = 0, math.min(n, 16) - 1 do
    local j = math.floor(i / 2) + 1
    if i % 2 == 0 then w[j] = w[j] + s:byte(p + i) else w[j] = w[j] + s:byte(p + i) * 256 end
  end
  return w
end

-- decimal prints a word array in decimal, without grouping (Ship.Decimal).
local function decimal(w)
  local v = { w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8] }
  local chunks = {}
  while true do
    local zero = true
    for i = 1, 8 do if v[i] ~= 0 then zero = false end end
    if zero then break end
    local rem = 0
    for i = 8, 1, -1 do
      local cur = rem * 65536 + v[i]
      v[i] = math.floor(cur / 10000)
      rem = cur % 10000
    end
    chunks[#chunks + 1] = rem
  end
  if #chunks == 0 then return "0" end
  local out = { string.format("%d", chunks[#chunks]) }
  for i = #chunks - 1, 1, -1 do out[#out + 1] = string.format("%04d", chunks[i]) end
  return table.concat(out)
end

-- The @p scrambling (lane/ob.go, hoon.hoon ++ob): a 4-round Feistel
-- cipher over [0, 0xffff0000) with the arvo#1105 final permutation.
local FA, FB = 0xffff, 0x10000
local FK = FA * FB
local OB_SEEDS = { 0xb76d5eed, 0xee281300, 0x85bcae01, 0x4b387af7 }

local function fe(m)
  local ell, arr = m % FA, math.floor(m / FA)
  for j = 1, 4 do
    local k = arr % 65536
    local f = murmur3(string.char(k % 256, math.floor(k / 256)), 1, 2, OB_SEEDS[j])
    local tmp
    if j % 2 == 1 then tmp = (f + ell) % FA else tmp = (f + ell) % FB end
    ell, arr = arr, tmp
  end
  if arr == FA then return arr * FA + ell end
  return ell * FA + arr
end

local function feis(m)
  local c = fe(m)
  if c < FK then return c end
  return fe(c)
end

-- patp prints a word array as @p (lane.Ship.String): +fein scrambles the
-- low 32 bits of planets and moons, then syllables per 16-bit word.
local function patp(w)
  local v = { w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8] }
  if v[5] + v[6] + v[7] + v[8] == 0 then
    local low = v[1] + v[2] * 65536
    if low >= 0x10000 then
      low = 0x10000 + feis(low - 0x10000)
      v[1], v[2] = low % 65536, math.floor(low / 65536)
    end
  end
  local top = 0
  for i = 1, 8 do if v[i] ~= 0 then top = i end end
  if top <= 1 and v[1] < 256 then return "~" .. suffix(v[1]) end
  local out = { "~" }
  for imp = top - 1, 0, -1 do
    local x = v[imp + 1]
    out[#out + 1] = prefix(math.floor(x / 256)) .. suffix(x % 256)
    if imp ~= 0 then
      if imp % 4 == 0 then out[#out + 1] = "--" else out[#out + 1] = "-" end
    end
  end
  return table.concat(out)
end

-- ---------------------------------------------------------------------
-- Fields. Names follow the --json report of `relay decode`; see the
-- contract at the top.

local f = {}

-- field declares the field urbit.<key>, keyed <key> in f; ctor is a
-- ProtoField constructor and the rest its arguments after the name.
local function field(key, ctor, label, ...)
  f[key] = ctor("urbit." .. key, label, ...)
end

local TYPE_NAMES = { [0] = "resv", [1] = "page", [2] = "peek", [3] = "poke" }
local HOP_NAMES = { [0] = "none", [1] = "short", [2] = "long", [3] = "many" }

-- HEAD_BITS lists, per protocol, the bit fields of the header word (an LE
-- u32), in tree order: key, label, mask, base, value names.
local HEAD_BITS = {
  mesa = {
    { "next_hop", "Next-hop type", 0x0000000c, base.DEC, HOP_NAMES },
    { "version", "Version", 0x00000070 },
    { "type", "Type", 0x00000180, base.DEC, TYPE_NAMES },
    { "hops", "Hops", 0x00000e00 },
    { "mug", "Mug", 0xfffff000, base.HEX },
    { "reserved", "Reserved", 0x00000003 },
  },
  ames = {
    { "reserved", "Reserved", 0x00000003 },
    { "req", "req (0 = request)", 0x00000004 },
    { "sam", "sam (0 = ames, 1 = fine)", 0x00000008 },
    { "ver", "Version", 0x00000070 },
    { "sac", "Sender rank", 0x00000180 },
    { "rac", "Receiver rank", 0x00000600 },
    { "mug", "Mug", 0x7ffff800, base.HEX },
    { "rel", "rel (0 = relayed)", 0x80000000 },
  },
}

field("protocol", ProtoField.string, "Protocol")
for _, p in ipairs({ "mesa", "ames" }) do
  field(p .. ".verdict", ProtoField.string, "Verdict")
  field(p .. ".reason", ProtoField.string, "Reason")
  field(p .. ".len", ProtoField.uint32, "Length", base.DEC)
  field(p .. ".type", ProtoField.string, "Type")
  field(p .. ".head", ProtoField.none, "Header")
  for _, b in ipairs(HEAD_BITS[p]) do
    field(p .. ".head." .. b[1], ProtoField.uint32, b[2], b[4] or base.DEC, b[5], b[3])
  end
end

for _, n in ipairs({ "name", "payload_name" }) do
  local k = "mesa." .. n
  field(k, ProtoField.none, n == "name" and "Name" or "Payload name")
  field(k .. ".rank", ProtoField.uint8, "Rank", base.DEC, nil, 0x03)
  field(k .. ".init", ProtoField.bool, "Init", 8, nil, 0x10)
  field(k .. ".auth", ProtoField.bool, "Auth (tau)", 8, nil, 0x20)
  field(k .. ".ship", ProtoField.string, "Ship")
  field(k .. ".ship_patp", ProtoField.string, "Ship (@p)")
  field(k .. ".rift", ProtoField.uint32, "Rift", base.DEC)
  field(k .. ".bloq", ProtoField.uint8, "Bloq", base.DEC)
  field(k .. ".frag", ProtoField.uint64, "Fragment", base.DEC)
  field(k .. ".path", ProtoField.string, "Path")
  field(k .. ".path_hex", ProtoField.bytes, "Path bytes")
end

field("mesa.data", ProtoField.none, "Data")
field("mesa.data.total", ProtoField.uint64, "Total", base.DEC)
field("mesa.data.auth", ProtoField.string, "Auth")
field("mesa.data.sig", ProtoField.bytes, "Signature")
field("mesa.data.hmac", ProtoField.bytes, "HMAC")
field("mesa.data.pair", ProtoField.bytes, "Merkle hash")
field("mesa.data.frag", ProtoField.bytes, "Fragment")

-- Lanes: a page's next hop, a relayed packet's origin.
for _, k in ipairs({ "mesa.next", "ames.origin" }) do
  field(k, ProtoField.none, k == "mesa.next" and "Next hop" or "Origin")
  field(k .. ".ip", ProtoField.ipv4, "IP")
  field(k .. ".port", ProtoField.uint16, "Port", base.DEC)
end
field("mesa.next.type", ProtoField.string, "Type")

field("ames.relayed", ProtoField.bool, "Relayed")
field("ames.sndr_tick", ProtoField.uint8, "Sender tick", base.DEC, nil, 0x0f)
field("ames.rcvr_tick", ProtoField.uint8, "Receiver tick", base.DEC, nil, 0xf0)
field("ames.sndr", ProtoField.string, "Sender")
field("ames.sndr_patp", ProtoField.string, "Sender (@p)")
field("ames.rcvr", ProtoField.string, "Receiver")
field("ames.rcvr_patp", ProtoField.string, "Receiver (@p)")
field("ames.content_hex", ProtoField.bytes, "Content")

do
  local list = {}
  for _, pf in pairs(f) do list[#list + 1] = pf end
  urbit.fields = list
end

-- ---------------------------------------------------------------------
-- Parsing: pure functions of the payload string s, returning a table of
-- what was read (with 0-based offsets and lengths for the tree) or a
-- rejection reason, worded as `relay decode --json` words it.

local MESA_MAX = 1472
local COOKIE = "\000\002\224\103"

local function is_mesa(s) return #s >= 8 and s:sub(5, 8) == COOKIE end

-- is_stun is scry.IsSTUN: a STUN binding request as vere recognises one.
local function is_stun(s)
  local n = #s
  if n < 28 or s:byte(1) ~= 0 or s:byte(2) ~= 1 or s:sub(5, 8) ~= "\033\018\164\066" then
    return false
  end
  local at = s:find("\128\040\000\004", 21, true)
  if at ~= n - 7 then return false end
  local fp = s:byte(n - 3) * 16777216 + s:byte(n - 2) * 65536 + s:byte(n - 1) * 256 + s:byte(n)
  return fp == bxor(crc32(s, n - 8), 0x5354554e)
end

local MesaErr = {
  eof = "parser: unexpected eof",
  eop = "parser: unexpected end of packet",
  proto = "parser: bad protocol",
  mug = "parser: bad mug",
  trailing = "parser: trailing bytes",
  varword = "parser: var_word too long",
  long = "parser: mesa: sift invalid hop long",
  many = "parser: mesa: sift invalid hop many",
  large = "gate: len > 1472, dropped by _mesa_hear before parsing",
}

-- A sifter reads fields at off (0-based) with scry's failure rules; each
-- reader returns nil and sets err on failure.
local function sifter(s)
  local z = { s = s, off = 8 }
  function z.take(n)
    if n > #s - z.off then z.err = z.err or MesaErr.eof; return nil end
    local at = z.off
    z.off = z.off + n
    return at
  end
  function z.meta()
    if #s - z.off < 2 then z.err = z.err or MesaErr.eop; return nil end
    z.off = z.off + 1
    return s:byte(z.off), z.off - 1
  end
  return z
end

local function sift_name(z)
  local m, at = z.meta()
  if not m then return nil end
  local n = { at = at, meta = m }
  n.rank = m % 4
  n.rift_w = math.floor(m / 4) % 4 + 1
  n.init = math.floor(m / 16) % 2 == 1
  n.auth = math.floor(m / 32) % 2 == 1
  n.frag_w = 2 ^ math.floor(m / 64)
  n.ship_w = 2 * 2 ^ n.rank
  n.ship_at = z.take(n.ship_w); if not n.ship_at then return nil end
  n.rift_at = z.take(n.rift_w); if not n.rift_at then return nil end
  n.bloq_at = z.take(1); if not n.bloq_at then return nil end
  if not n.init then
    n.frag_at = z.take(n.frag_w); if not n.frag_at then return nil end
  end
  local pl = z.take(2); if not pl then return nil end
  n.path_len = le(z.s, pl + 1, 2)
  n.path_at = z.take(n.path_len); if not n.path_at then return nil end
  n.len = z.off - at
  return n
end

local AUTH_NAMES = { [0] = "sign", [1] = "none", [2] = "hmac", [3] = "pair" }
local AUTH_LENS = { [0] = 64, [1] = 0, [2] = 16, [3] = 64 }

local function sift_data(z)
  local m, at = z.meta()
  if not m then return nil end
  local d = { at = at }
  d.total_w = 2 ^ (m % 4)
  d.auth = math.floor(m / 4) % 4
  local men = math.floor(m / 64)
  d.total_at = z.take(d.total_w); if not d.total_at then return nil end
  d.auth_at = z.take(AUTH_LENS[d.auth]); if not d.auth_at then return nil end
  local width = men
  if men == 3 then
    local wb = z.take(1); if not wb then return nil end
    width = z.s:byte(wb + 1)
  end
  if width > 4 then z.err = z.err or MesaErr.varword; return nil end
  local fl = z.take(width); if not fl then return nil end
  d.frag_len = le(z.s, fl + 1, width)
  if d.frag_len > #z.s - z.off then z.err = z.err or MesaErr.eof; return nil end
  d.frag_at = z.take(d.frag_len)
  d.len = z.off - at
  return d
end

-- parse_mesa is scry.Packet.Parse for a datagram that is_mesa.
local function parse_mesa(s)
  local r = { protocol = "mesa", len = #s }
  if #s > MESA_MAX then r.reason = MesaErr.large; return r end
  local w = le(s, 1, 4)
  r.word = w
  r.next_hop = math.floor(w / 4) % 4
  r.version = math.floor(w / 16) % 8
  r.type = math.floor(w / 128) % 4
  r.hops = math.floor(w / 512) % 8
  r.mug = math.floor(w / 4096)
  if r.version ~= 1 then r.reason = MesaErr.proto; return r end
  local z = sifter(s)
  if r.type == 2 then
    r.name = sift_name(z)
  elseif r.type == 3 then
    r.name = sift_name(z)
    if r.name then r.payload_name = sift_name(z) end
    if r.payload_name then r.data = sift_data(z) end
  elseif r.type == 1 then
    r.name = sift_name(z)
    if r.name then r.data = sift_data(z) end
    if r.data then
      if r.next_hop == 1 then
        r.next_at = z.take(6)
      elseif r.next_hop == 2 then
        z.err = MesaErr.long
      elseif r.next_hop == 3 then
        z.err = MesaErr.many
      end
    end
  end
  if z.err then r.reason = z.err; return r end
  if mug(s, 9, z.off - 8) % 0x100000 ~= r.mug then r.reason = MesaErr.mug; return r end
  if z.off ~= #s then r.reason = MesaErr.trailing; return r end
  r.accept = true
  return r
end

-- parse_ames is scry.AmesPacket.Parse after the mesa and STUN gates.
local function parse_ames(s)
  local r = { protocol = "ames", len = #s }
  if #s < 4 then r.reason = "ames: short-header"; return r end
  local w = le(s, 1, 4)
  r.word = w
  r.req = math.floor(w / 4) % 2 == 0
  r.is_ames = math.floor(w / 8) % 2 == 0
  r.version = math.floor(w / 16) % 8
  r.sndr_w = 2 * 2 ^ (math.floor(w / 128) % 4)
  r.rcvr_w = 2 * 2 ^ (math.floor(w / 512) % 4)
  r.mug = math.floor(w / 2048) % 0x100000
  r.relayed = w < 0x80000000
  if r.version ~= 0 then r.reason = "ames: bad-version"; return r end
  local off = 4
  if r.relayed then
    off = 10
    if #s < off then r.reason = "ames: short-origin"; return r end
  end
  if mug(s, off + 1, #s - off) % 0x100000 ~= r.mug then r.reason = "ames: bad-mug"; return r end
  if #s < off + 1 + r.sndr_w + r.rcvr_w then r.reason = "ames: truncated-prelude"; return r end
  r.ticks_at = off
  r.sndr_at = off + 1
  r.rcvr_at = r.sndr_at + r.sndr_w
  r.content_at = r.rcvr_at + r.rcvr_w
  if r.is_ames then r.class = "ames" elseif r.req then r.class = "wail" else r.class = "purr" end
  r.accept = true
  return r
end

-- parse returns the report of a non-empty, non-STUN datagram.
local function parse(s)
  if is_mesa(s) then return parse_mesa(s) end
  return parse_ames(s)
end

-- ---------------------------------------------------------------------
-- The tree.

local function printable(s, at, n)
  for i = at + 1, at + n do
    local c = s:byte(i)
    if c < 0x20 or c > 0x7e then return false end
  end
  return true
end

-- bytes_item adds the bytes field pf, labelled label, for n bytes at at;
-- an empty one gets an empty value, as the JSON report's "".
local function bytes_item(tree, pf, label, tvb, at, n)
  if n > 0 then return tree:add(pf, tvb(at, n)) end
  return tree:add(pf, ""):set_text(label .. ": (empty)")
end

local function ship_items(tree, key, s, tvb, at, n)
  local w = words(s, at + 1, n)
  local dec, p = decimal(w), patp(w)
  tree:add(f[key], tvb(at, n), dec):append_text(" (" .. p .. ")")
  tree:add(f[key .. "_patp"], tvb(at, n), p)
  return p
end

local function name_tree(tree, key, s, tvb, n)
  local t = tree:add(f[key], tvb(n.at, n.len))
  t:add(f[key .. ".rank"], tvb(n.at, 1))
  t:add(f[key .. ".init"], tvb(n.at, 1))
  t:add(f[key .. ".auth"], tvb(n.at, 1))
  local p = ship_items(t, key .. ".ship", s, tvb, n.ship_at, n.ship_w)
  t:add_le(f[key .. ".rift"], tvb(n.rift_at, n.rift_w))
  t:add(f[key .. ".bloq"], tvb(n.bloq_at, 1))
  local frag = "init"
  if n.init then
    t:add(f[key .. ".frag"], UInt64(0))
  else
    local fr = t:add_le(f[key .. ".frag"], tvb(n.frag_at, n.frag_w))
    frag = tostring(tvb(n.frag_at, n.frag_w):le_uint64())
    fr:set_text("Fragment: " .. frag)
  end
  local path = nil
  if printable(s, n.path_at, n.path_len) then
    path = s:sub(n.path_at + 1, n.path_at + n.path_len)
    if n.path_len > 0 then
      t:add(f[key .. ".path"], tvb(n.path_at, n.path_len), path)
    else
      t:add(f[key .. ".path"], path)
    end
  end
  bytes_item(t, f[key .. ".path_hex"], "Path bytes", tvb, n.path_at, n.path_len)
  local summary = p .. " /" .. (path or "...")
  t:append_text(": " .. summary .. " rift " .. string.format("%d", le(s, n.rift_at + 1, n.rift_w)) ..
    (n.init and " init" or (" frag " .. frag)))
  return summary
end

local function data_tree(tree, s, tvb, d)
  local t = tree:add(f["mesa.data"], tvb(d.at, d.len))
  t:add_le(f["mesa.data.total"], tvb(d.total_at, d.total_w))
  t:add(f["mesa.data.auth"], tvb(d.at, 1), AUTH_NAMES[d.auth])
  if d.auth == 0 then
    t:add(f["mesa.data.sig"], tvb(d.auth_at, 64))
  elseif d.auth == 2 then
    t:add(f["mesa.data.hmac"], tvb(d.auth_at, 16))
  elseif d.auth == 3 then
    t:add(f["mesa.data.pair"], tvb(d.auth_at, 32))
    t:add(f["mesa.data.pair"], tvb(d.auth_at + 32, 32))
  end
  bytes_item(t, f["mesa.data.frag"], "Fragment", tvb, d.frag_at, d.frag_len)
  t:append_text(": auth " .. AUTH_NAMES[d.auth] .. ", " .. d.frag_len .. " bytes")
end

-- report_root adds the protocol's item with the fields every report has
-- (protocol, verdict, reason, len) and returns it; for a reject it fills
-- the info column and returns nil.
local function report_root(tree, pinfo, tvb, r, label)
  local p = r.protocol
  local root = tree:add(urbit, tvb(), label)
  root:add(f["protocol"], p)
  root:add(f[p .. ".verdict"], r.accept and "accept" or "reject")
  if r.reason then root:add(f[p .. ".reason"], r.reason) end
  root:add(f[p .. ".len"], r.len)
  if r.accept then return root end
  root:append_text(": reject, " .. r.reason)
  pinfo.cols.info = p .. " reject: " .. r.reason
  return nil
end

-- head_tree adds the header word's bit fields, HEAD_BITS[p].
local function head_tree(root, p, tvb)
  local h = root:add(f[p .. ".head"], tvb(0, 4))
  for _, b in ipairs(HEAD_BITS[p]) do h:add_le(f[p .. ".head." .. b[1]], tvb(0, 4)) end
end

-- lane_tree adds the SHORT lane at 0-based at (lane.DecodeShort: the IPv4
-- address as a host-order u32 written LE, then the port LE) as the subtree
-- key with key.ip and key.port, and returns it and "ip:port".
local function lane_tree(root, key, s, tvb, at)
  local t = root:add(f[key], tvb(at, 6))
  t:add_le(f[key .. ".ip"], tvb(at, 4))
  t:add_le(f[key .. ".port"], tvb(at + 4, 2))
  local lane = string.format("%d.%d.%d.%d:%d", s:byte(at + 4), s:byte(at + 3), s:byte(at + 2),
    s:byte(at + 1), le(s, at + 5, 2))
  t:append_text(": " .. lane)
  return t, lane
end

local function mesa_tree(tree, pinfo, s, tvb, r)
  local root = report_root(tree, pinfo, tvb, r, "Urbit mesa")
  if not root then return end
  local tname = TYPE_NAMES[r.type]
  root:add(f["mesa.type"], tname)
  head_tree(root, "mesa", tvb)
  local info = "mesa " .. tname .. " hops " .. r.hops
  if r.name then info = info .. " " .. name_tree(root, "mesa.name", s, tvb, r.name) end
  if r.payload_name then
    info = info .. " from " .. name_tree(root, "mesa.payload_name", s, tvb, r.payload_name)
  end
  if r.data then data_tree(root, s, tvb, r.data) end
  if r.type == 1 then
    if r.next_hop == 1 then
      local t, lane = lane_tree(root, "mesa.next", s, tvb, r.next_at)
      t:add(f["mesa.next.type"], tvb(r.next_at, 6), "short")
      info = info .. " next " .. lane
    else
      root:add(f["mesa.next"]):add(f["mesa.next.type"], "none")
    end
  end
  root:append_text(": " .. tname)
  pinfo.cols.info = info
end

local function ames_tree(tree, pinfo, s, tvb, r)
  local root = report_root(tree, pinfo, tvb, r, "Urbit legacy ames")
  if not root then return end
  root:add(f["ames.type"], r.class)
  head_tree(root, "ames", tvb)
  root:add(f["ames.relayed"], tvb(3, 1), r.relayed)
  local info = "ames " .. r.class
  if r.relayed then
    local _, origin = lane_tree(root, "ames.origin", s, tvb, 4)
    info = info .. " relayed from " .. origin
  end
  root:add(f["ames.sndr_tick"], tvb(r.ticks_at, 1))
  root:add(f["ames.rcvr_tick"], tvb(r.ticks_at, 1))
  local sp = ship_items(root, "ames.sndr", s, tvb, r.sndr_at, r.sndr_w)
  local rp = ship_items(root, "ames.rcvr", s, tvb, r.rcvr_at, r.rcvr_w)
  bytes_item(root, f["ames.content_hex"], "Content", tvb, r.content_at, #s - r.content_at)
  info = info .. " " .. sp .. " -> " .. rp
  root:append_text(": " .. r.class .. " " .. sp .. " -> " .. rp)
  pinfo.cols.info = info
end

-- dissect adds the tree for a parsed report and claims the datagram.
local function dissect(tvb, pinfo, tree, s, r)
  pinfo.cols.protocol = r.protocol == "mesa" and "MESA" or "AMES"
  if r.protocol == "mesa" then
    mesa_tree(tree, pinfo, s, tvb, r)
  else
    ames_tree(tree, pinfo, s, tvb, r)
  end
  return tvb:len()
end

-- stun_shaped reports whether s has a STUN message header (RFC 8489): the
-- two top bits zero, the magic cookie at bytes 4-7, and a length field
-- giving the rest of the datagram, a multiple of 4.
local function stun_shaped(s)
  local n = #s
  if n < 20 or s:byte(1) >= 64 or s:sub(5, 8) ~= "\033\018\164\066" then return false end
  local len = s:byte(3) * 256 + s:byte(4)
  return len == n - 20 and len % 4 == 0
end

-- The port dissector: every datagram but empty ones and STUN, which is left
-- to Wireshark's STUN dissector: the requests the relay answers (is_stun)
-- and any STUN-shaped datagram that does not parse as legacy ames (vere's
-- responses, for one).
function urbit.dissector(tvb, pinfo, tree)
  if tvb:len() == 0 or tvb:captured_len() ~= tvb:reported_length_remaining() then return 0 end
  local s = tvb:raw()
  if not is_mesa(s) and is_stun(s) then return 0 end
  local r = parse(s)
  if not r.accept and r.protocol == "ames" and stun_shaped(s) then return 0 end
  return dissect(tvb, pinfo, tree, s, r)
end

-- The heuristic: accepted packets only.
local function heuristic(tvb, pinfo, tree)
  if tvb:len() < 4 or tvb:captured_len() ~= tvb:reported_length_remaining() then return false end
  local s = tvb:raw()
  if not is_mesa(s) and is_stun(s) then return false end
  local r = parse(s)
  if not r.accept then return false end
  dissect(tvb, pinfo, tree, s, r)
  return true
end

DissectorTable.get("udp.port"):add("13337-13592", urbit)
urbit:register_heuristic("udp", heuristic)
