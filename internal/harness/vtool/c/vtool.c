//  vtool: vere's own UDP drivers, run by a stub pier and a stub arvo.
//
//  Linked unmodified from urbit/vere: io/mesa.c, io/ames.c, io/ames/stun.c,
//  io/mesa/pact.c, io/mesa/bitset.c, io/lss.c, auto.c, ward.c and the noun
//  library.  This file stands in for the pier (event queue, scry) and for arvo
//  (a few scry answers, acks, pages), and prints what goes in and out:
//
//    vtool ship SHIP PORT [options]      vere's drivers as SHIP on UDP PORT
//    vtool peek SHIP PATH IP:PORT        send a hop-0 peek, wait for the page
//    vtool poke RCVR SNDR IP:PORT        send a hop-0 poke, wait for the ack
//    vtool publish SHIP PORT             answer peeks and pokes for SHIP
//    vtool send IP:PORT HEX...           send raw datagrams, print replies
//
//  stdout: one line per thing, a word and a JSON object (READY, RECV, EVENT,
//  SCRY, SEND, STUN, END); vere's own log goes to stderr.  README.md has the
//  options, the output fields and the exit codes.
//
//  This copy (github.com/urbit-relay/relay internal/harness/vtool/c, built by
//  build.sh beside it) adds to ../shared/vere/harness/vtool.c:
//
//    vtool ship ... --accept SHIP[@IP[:PORT]]   (repeatable)
//
//    vtool ship ... --unanswered PREFIX           (a path prefix, such as /bait)
//
//  With --unanswered, the stub arvo gives no page for a peek whose path starts
//  with PREFIX (a name not grown yet: real arvo blocks on it); others as before.
//  With any --accept, the stub arvo acks a poke only when its sender (the
//  payload's ship) is an accepted ship and it arrived from that entry's IP
//  (and port, when given); any other poke is printed as ARVO {"kind":"refuse",
//  "ship","lane","path"} and not acked, as real arvo drops a forged ping it
//  cannot decrypt.  `vtool version` lists "accept" in "features".  With
//  --arvo-lanes too, a poke whose name arvo acked before is a copy of a
//  message it decrypted (a replay, from any lane): it is acked again, as
//  arvo acks a dupe, and printed as ARVO {"kind":"dupe","ship","lane","path"}
//  (A2 in docs/arvo-lanes.md; "dupe" in `vtool version`'s features).
//
//    vtool ship ... --arvo-lanes [--ping-sponsors] [--rounds N] [--round-gap-ms MS]
//                   [--dead-ms MS] [--retry-ms MS] [--ping-ms MS]
//
//  With --arvo-lanes the stub arvo follows stock arvo's lane rules
//  (docs/arvo-lanes.md, each rule cited from urbit/urbit's ames.hoon): it
//  learns a peer's lane from the pages and pokes vere hands it (%heer),
//  gives %nail when a lane changes, answers /chums/~X/lanes from what it
//  learned, and sends --push-peek's request with +make-lanes's lanes
//  ([lane], [lane galaxy] or [galaxy]), round after round with --rounds
//  (PATH/1 ... PATH/N, each when the previous is answered), pushing anything
//  outstanding again every --retry-ms (arvo: 2 min).  --ping-sponsors pokes
//  every ship of our sponsorship chain as the %ping agent does (again
//  --ping-ms after each ack, arvo: 25 s; STUN's %stop and %once as ping.hoon
//  takes them), each poke a new message number, its names sealed per peer
//  as mesa's are (/chum/1/~us/1/0v...).  It prints ARVO lines of kind lane,
//  nail, push (with "lanes" and "rule"), answer, acked and ping.  `vtool
//  version` lists "arvo-lanes".
//
//    vtool publish ... --ping SPONSOR@IP:PORT --ping-seq N
//
//  With --ping-seq, publish's pings are messages N, N+1, ... (ack names
//  /a/x/1//ack/N, ...), each its own name as mesa's are; without it every
//  ping is message 1, as before.  `vtool version` lists "ping-seq".
//
//    vtool ship ... --quiet
//
//  With --quiet no RECV or SEND line is printed (nor the datagram parsed
//  again to describe it), so that the process's CPU is vere's own: for
//  measuring vere's forwarding (relay/interop TestVereForwardCPU).  Other
//  lines are printed as before.  `vtool version` lists "quiet".
//
#include "vere.h"
#include "noun.h"
#include "io/mesa/mesa.h"
#include "io/ames/stun.h"
#include "murmur3.h"
#include <arpa/inet.h>
#include <ctype.h>
#include <poll.h>
#include <signal.h>
#include <netdb.h>

typedef struct sockaddr_in sockaddr_in;

#define VERE_COMMIT "859fd5c65c86af647144f024c155988afce0e6c8"

#define EXIT_OK       0   //  the mode's goal was met
#define EXIT_MISSED   1   //  the time limit passed first (or STUN failed)
#define EXIT_USAGE    2   //  bad command line
#define EXIT_SETUP    3   //  could not start (bind, ...)

u3_host u3_Host;
u3_king u3_King;

static u3_pier   pir_u;            //  the one pier
static u3_auto*  car_u;            //  its drivers (ames, mesa)
static c3_d      our_d;            //  our ship (64 bits are enough here)
static c3_w      lim_w = 30;       //  --time-limit, seconds
static c3_c*     unt_c;            //  --until: heer hear event send stun
static c3_o      ans_o = c3y;      //  arvo answers peeks (pages) and pokes (acks)
static c3_c*     pag_c = "hello";  //  --page / --data: page content
static c3_w      evm_w = 0;        //  --event-ms: arvo's time per event
static c3_c*     dom_c = "urbit.org";  //  --domain, the %turf
static c3_c*     una_c = 0;        //  --unanswered: no page for paths with this prefix
static c3_t      qui_t = 0;        //  --quiet: no RECV or SEND lines (a CPU measurement)

//  galaxy DNS answers: 0 unknown (not found), else IPv4 (host order);
//  gap_s: --galaxy G=IP:PORT, where datagrams vere sends to IP:13337+G go instead
static c3_w      gal_w[256];
static c3_s      gap_s[256];

//  --lane SHIP=IP:PORT: lanes arvo knows
static struct { c3_d who_d; c3_w pip_w; c3_s por_s; } lan_u[64];
static c3_w      lan_w = 0;

//  --accept SHIP[@IP[:PORT]]: the senders whose pokes arvo acks (any, when
//  acc_w is 0); pip_w 0: from any address, por_s 0: from any port
static struct { c3_d who_d; c3_w pip_w; c3_s por_s; } acc_u[64];
static c3_w      acc_w = 0;

//  ---- output

typedef struct { c3_c buf_c[4096]; c3_w len_w; } jbuf;

static void
_jb_raw(jbuf* j, const c3_c* fmt_c, ...)
{
  va_list ap;
  va_start(ap, fmt_c);
  if ( j->len_w < sizeof(j->buf_c) ) {
    c3_i n = vsnprintf(j->buf_c + j->len_w, sizeof(j->buf_c) - j->len_w, fmt_c, ap);
    if ( n > 0 ) j->len_w = c3_min(j->len_w + n, sizeof(j->buf_c) - 1);
  }
  va_end(ap);
}

static void
_jb_key(jbuf* j, const c3_c* key_c)
{
  _jb_raw(j, "%s\"%s\":", (j->len_w > 1) ? "," : "", key_c);
}

static void
_jb_strn(jbuf* j, const c3_c* key_c, const c3_c* val_c, c3_w len_w)
{
  _jb_key(j, key_c);
  _jb_raw(j, "\"");
  for ( c3_w i = 0; i < len_w; i++ ) {
    c3_y c = val_c[i];
    if ( c == '"' || c == '\\' ) _jb_raw(j, "\\%c", c);
    else if ( c < 0x20 || c >= 0x7f ) _jb_raw(j, "\\u%04x", c);
    else _jb_raw(j, "%c", c);
  }
  _jb_raw(j, "\"");
}

static void _jb_str(jbuf* j, const c3_c* key_c, const c3_c* val_c) { _jb_strn(j, key_c, val_c, strlen(val_c)); }
static void _jb_num(jbuf* j, const c3_c* key_c, c3_d val_d) { _jb_key(j, key_c); _jb_raw(j, "%llu", (unsigned long long)val_d); }
static void _jb_init(jbuf* j) { j->len_w = 0; _jb_raw(j, "{"); }

static void
_jb_emit(const c3_c* wor_c, jbuf* j)
{
  _jb_raw(j, "}");
  fprintf(stdout, "%s %s\n", wor_c, j->buf_c);
  fflush(stdout);
}

static void
_lane_str(c3_c* out_c, c3_w pip_w, c3_s por_s)   //  host order; out_c >= 24
{
  snprintf(out_c, 24, "%u.%u.%u.%u:%u", pip_w >> 24, (pip_w >> 16) & 255,
           (pip_w >> 8) & 255, pip_w & 255, por_s);
}

static void
_jb_lane(jbuf* j, const c3_c* key_c, c3_w pip_w, c3_s por_s)
{
  c3_c lan_c[24];
  _lane_str(lan_c, pip_w, por_s);
  _jb_str(j, key_c, lan_c);
}

static void
_jb_sock(jbuf* j, const c3_c* key_c, const struct sockaddr* adr_u)
{
  const sockaddr_in* a = (const sockaddr_in*)adr_u;
  _jb_lane(j, key_c, ntohl(a->sin_addr.s_addr), ntohs(a->sin_port));
}

static void
_end(const c3_c* why_c, c3_i cod_i)
{
  jbuf j; _jb_init(&j);
  _jb_str(&j, "reason", why_c);
  _jb_num(&j, "exit", cod_i);
  _jb_emit("END", &j);
  fflush(stderr);
  _exit(cod_i);
}

//  vere's log: one plain line on stderr (quiet while the loom boots)
static c3_t bot_t;

static void
_vere_log(c3_c* msg_c)
{
  if ( !bot_t ) fprintf(stderr, "vere: %s\n", msg_c);
}

//  ---- @p, with vere's syllables (jets/c/po.c) and ob's Feistel cipher

static c3_w
_muk(c3_w syd_w, c3_w key_w)
{
  c3_y key_y[2] = { key_w & 0xff, (key_w >> 8) & 0xff };
  c3_w out_w;
  MurmurHash3_x86_32(key_y, 2, syd_w, &out_w);
  return out_w;
}

static const c3_w _raku[4] = { 0xb76d5eed, 0xee281300, 0x85bcae01, 0x4b387af7 };

static c3_d
_fe(c3_d m)
{
  c3_d a = 0xffff, b = 0x10000, ell = m % a, arr = m / a;
  for ( c3_w j = 1; j <= 4; j++ ) {
    c3_d f = _muk(_raku[j - 1], arr);
    c3_d tmp = (j % 2) ? (f + ell) % a : (f + ell) % b;
    ell = arr; arr = tmp;
  }
  return (arr == a) ? (arr * a) + ell : (ell * a) + arr;
}

static c3_d
_fen(c3_d m)
{
  c3_d a = 0xffff, b = 0x10000;
  c3_d ahh = m % a, ale = m / a;
  c3_d L = (ale == a) ? ahh : ale, R = (ale == a) ? ale : ahh;
  for ( c3_w j = 4; j >= 1; j-- ) {
    c3_d f = _muk(_raku[j - 1], L);
    c3_d tmp = (j % 2) ? (R + a - (f % a)) % a : (R + b - (f % b)) % b;
    R = L; L = tmp;
  }
  return (R * a) + L;
}

static c3_d _fee(c3_d m) { c3_d c = _fe(m);  return (c < 0xffffULL * 0x10000ULL) ? c : _fe(c); }
static c3_d _rev(c3_d m) { c3_d c = _fen(m); return (c < 0xffffULL * 0x10000ULL) ? c : _fen(c); }

static c3_d
_fein(c3_d p)
{
  if ( p >= 0x10000ULL && p <= 0xffffffffULL ) return 0x10000ULL + _fee(p - 0x10000ULL);
  if ( p > 0xffffffffULL ) return (p & 0xffffffff00000000ULL) | _fein(p & 0xffffffffULL);
  return p;
}

static c3_d
_fynd(c3_d p)
{
  if ( p >= 0x10000ULL && p <= 0xffffffffULL ) return 0x10000ULL + _rev(p - 0x10000ULL);
  if ( p > 0xffffffffULL ) return (p & 0xffffffff00000000ULL) | _fynd(p & 0xffffffffULL);
  return p;
}

//  vere's table names: u3_po_to_suffix gives galaxy names (zod nec ...)
static void _pre(c3_y i, c3_c* o) { u3_po_to_prefix(i, (c3_y*)o, (c3_y*)o + 1, (c3_y*)o + 2); }
static void _suf(c3_y i, c3_c* o) { u3_po_to_suffix(i, (c3_y*)o, (c3_y*)o + 1, (c3_y*)o + 2); }

static void
_patp(c3_d who_d, c3_c* out_c)   //  out_c >= 64
{
  c3_d sxz = _fein(who_d);
  c3_c* o = out_c;
  *o++ = '~';
  if ( sxz < 256 ) {
    _suf(sxz, o); o += 3;
  } else {
    c3_w w_w[4], dyy_w = 0;
    while ( sxz ) { w_w[dyy_w++] = sxz & 0xffff; sxz >>= 16; }
    for ( c3_i i = dyy_w - 1; i >= 0; i-- ) {
      _pre(w_w[i] >> 8, o); _suf(w_w[i] & 0xff, o + 3); o += 6;
      if ( i ) {
        if ( 0 == (i % 4) ) *o++ = '-';
        *o++ = '-';
      }
    }
  }
  *o = 0;
}

static c3_i
_syl(u3_noun (*fin)(c3_y, c3_y, c3_y), const c3_c* s)
{
  u3_noun r = fin(s[0], s[1], s[2]);
  if ( u3_nul == r ) return -1;
  c3_i i = u3t(r); u3z(r);
  return i;
}

//  parse "~nec", "~marzod", "~sampel-palnet", ..., or a decimal number
static c3_t
_ship_parse(const c3_c* txt_c, c3_d* who_d)
{
  if ( '~' != txt_c[0] ) {
    c3_c* end_c;
    if ( !*txt_c ) return 0;
    *who_d = strtoull(txt_c, &end_c, 10);
    return !*end_c;
  }
  const c3_c* s = txt_c + 1;
  c3_w len_w = strlen(s);
  if ( 3 == len_w ) {
    c3_i i = _syl(u3_po_find_suffix, s);
    if ( i < 0 ) return 0;
    *who_d = i; return 1;
  }
  c3_d val_d = 0; c3_w n_w = 0;
  while ( *s ) {
    c3_i p, q;
    if ( strlen(s) < 6 || n_w == 4 ) return 0;
    if ( (p = _syl(u3_po_find_prefix, s)) < 0 || (q = _syl(u3_po_find_suffix, s + 3)) < 0 ) return 0;
    val_d = (val_d << 16) | (p << 8) | q; n_w++;
    s += 6;
    if ( '-' == *s ) { s++; if ( '-' == *s ) s++; if ( !*s ) return 0; }
    else if ( *s ) return 0;
  }
  *who_d = _fynd(val_d);
  return 1;
}

static c3_c*
_ship_str2(c3_d who_d, c3_d hig_d)   //  static buffer ring; comets in hex
{
  static c3_c buf_c[8][64];
  static c3_w i_w = 0;
  c3_c* o = buf_c[i_w++ % 8];
  if ( hig_d ) snprintf(o, 64, "0x%llx%016llx", (unsigned long long)hig_d, (unsigned long long)who_d);
  else _patp(who_d, o);
  return o;
}

static c3_c* _ship_str(c3_d who_d) { return _ship_str2(who_d, 0); }

static c3_d
_sein(c3_d who_d)
{
  if ( who_d < 0x100 ) return who_d;
  if ( who_d < 0x10000 ) return who_d & 0xff;
  if ( who_d < 0x100000000ULL ) return who_d & 0xffff;
  return who_d & 0xffffffff;
}

static c3_d
_galaxy(c3_d who_d)
{
  while ( who_d >= 0x100 ) who_d = _sein(who_d);
  return who_d;
}

//  ---- describing datagrams

static c3_d _ship64(u3_ship her_u) { return her_u[1] ? ~0ULL : her_u[0]; }
static c3_c* _her_str(u3_ship her_u) { return _ship_str2(her_u[0], her_u[1]); }

static void
_jb_path(jbuf* j, const c3_c* key_c, u3_mesa_name* nam_u)
{
  c3_c pat_c[FINE_PATH_MAX + 2];
  c3_w len_w = c3_min(nam_u->pat_s, FINE_PATH_MAX);
  pat_c[0] = '/';
  memcpy(pat_c + 1, nam_u->pat_c, len_w);
  _jb_strn(j, key_c, pat_c, len_w + 1);
}

static void
_jb_data(jbuf* j, u3_mesa_data* dat_u)
{
  _jb_num(j, "total", dat_u->tob_d);
  c3_t txt_t = 1;
  for ( c3_w i = 0; i < dat_u->len_w; i++ ) {
    if ( dat_u->fra_y[i] < 0x20 || dat_u->fra_y[i] >= 0x7f ) { txt_t = 0; break; }
  }
  if ( txt_t && dat_u->len_w <= 256 ) {
    _jb_strn(j, "data", (c3_c*)dat_u->fra_y, dat_u->len_w);
  }
}

static const c3_c*
_mesa_type(c3_y typ_y)
{
  switch ( typ_y ) {
    case PACT_PEEK: return "peek";
    case PACT_POKE: return "poke";
    case PACT_PAGE: return "page";
    default:        return "reserved";
  }
}

//  legacy ames header and prelude (ames.c's parsers are static)
static void
_describe_ames(jbuf* j, c3_y* buf_y, c3_w len_w)
{
  _jb_str(j, "proto", "ames");
  if ( len_w < 4 ) { _jb_str(j, "error", "short"); return; }
  //  the flag bits are loobeans: 0 is yes
  c3_w hed_w = c3_sift_word(buf_y);
  c3_t req_t = !((hed_w >> 2) & 1), sim_t = !((hed_w >> 3) & 1), rel_t = !((hed_w >> 31) & 1);
  c3_y sac_y = (hed_w >> 7) & 3, rac_y = (hed_w >> 9) & 3;
  _jb_str(j, "type", sim_t ? "ames" : req_t ? "wail" : "purr");
  c3_w cur_w = 4;
  if ( rel_t ) {
    if ( len_w < cur_w + 6 ) { _jb_str(j, "error", "short"); return; }
    c3_y rag_y[8] = {0};
    memcpy(rag_y, buf_y + cur_w, 6);
    c3_d rog_d = c3_sift_chub(rag_y);
    _jb_lane(j, "origin", (c3_w)rog_d, (c3_s)(rog_d >> 32));
    cur_w += 6;
  }
  c3_w sen_w = 2 << sac_y, rec_w = 2 << rac_y;
  if ( len_w < cur_w + 1 + sen_w + rec_w ) { _jb_str(j, "error", "short"); return; }
  cur_w++;
  c3_y sip_y[16] = {0};
  memcpy(sip_y, buf_y + cur_w, sen_w); cur_w += sen_w;
  _jb_str(j, "sender", _ship_str2(c3_sift_chub(sip_y), c3_sift_chub(sip_y + 8)));
  memset(sip_y, 0, 16);
  memcpy(sip_y, buf_y + cur_w, rec_w);
  _jb_str(j, "receiver", _ship_str2(c3_sift_chub(sip_y), c3_sift_chub(sip_y + 8)));
}

c3_o __real_u3_stun_find_xor_mapped_address(c3_y*, c3_w, u3_lane*);

static void
_describe(jbuf* j, c3_y* buf_y, c3_w len_w)
{
  _jb_num(j, "bytes", len_w);
  if ( c3y == u3_stun_is_request(buf_y, len_w) ) {
    _jb_str(j, "proto", "stun");
    _jb_str(j, "type", "request");
    return;
  }
  if ( len_w >= 20 && 0x01 == buf_y[0] && 0x01 == buf_y[1] && 0x21 == buf_y[4]
       && 0x12 == buf_y[5] && 0xa4 == buf_y[6] && 0x42 == buf_y[7] ) {
    u3_lane lan_u;
    _jb_str(j, "proto", "stun");
    _jb_str(j, "type", "response");
    if ( c3y == __real_u3_stun_find_xor_mapped_address(buf_y, len_w, &lan_u) ) {
      _jb_lane(j, "mapped", lan_u.pip_w, lan_u.por_s);
    }
    return;
  }
  if ( c3n == mesa_is_new_pact(buf_y, len_w) ) {
    _describe_ames(j, buf_y, len_w);
    return;
  }
  _jb_str(j, "proto", "mesa");
  u3_mesa_pact pac_u;
  c3_c* err_c = mesa_sift_pact_from_buf(&pac_u, buf_y, len_w);
  if ( err_c ) {
    _jb_str(j, "error", err_c);
    return;
  }
  u3_mesa_head* hed_u = &pac_u.hed_u;
  _jb_str(j, "type", _mesa_type(hed_u->typ_y));
  _jb_num(j, "hops", hed_u->hop_y);
  switch ( hed_u->typ_y ) {
    case PACT_PEEK: {
      _jb_str(j, "ship", _her_str(pac_u.pek_u.nam_u.her_u));
      _jb_path(j, "path", &pac_u.pek_u.nam_u);
      _jb_num(j, "frag", pac_u.pek_u.nam_u.fra_d);
    } break;
    case PACT_POKE: {
      _jb_str(j, "ship", _her_str(pac_u.pok_u.nam_u.her_u));
      _jb_path(j, "path", &pac_u.pok_u.nam_u);
      _jb_str(j, "payload_ship", _her_str(pac_u.pok_u.pay_u.her_u));
      _jb_path(j, "payload_path", &pac_u.pok_u.pay_u);
    } break;
    case PACT_PAGE: {
      _jb_str(j, "ship", _her_str(pac_u.pag_u.nam_u.her_u));
      _jb_path(j, "path", &pac_u.pag_u.nam_u);
      _jb_num(j, "frag", pac_u.pag_u.nam_u.fra_d);
      if ( HOP_SHORT == hed_u->nex_y ) {
        _jb_lane(j, "next_hop", c3_sift_word(pac_u.pag_u.sot_u),
                 c3_sift_short(pac_u.pag_u.sot_u + 4));
      }
      else if ( HOP_NONE != hed_u->nex_y ) {
        _jb_str(j, "next_hop", (HOP_LONG == hed_u->nex_y) ? "long" : "many");
      }
      _jb_data(j, &pac_u.pag_u.dat_u);
    } break;
  }
}

//  a packet given to arvo is an atom, which has lost any trailing zero bytes:
//  find the length it parses at (mesa), or pad the prelude with zeros (ames)
static c3_y*
_atom_pact(u3_noun pac, c3_w* len_w)
{
  c3_w  met_w = u3r_met(3, pac);
  c3_y* buf_y = c3_calloc(met_w + 128);
  u3r_bytes(0, met_w, buf_y, pac);
  *len_w = met_w;
  if ( c3y == mesa_is_new_pact(buf_y, met_w + 128) ) {
    u3_mesa_pact pac_u;
    for ( c3_w n_w = met_w; n_w <= met_w + 128 && n_w <= PACT_SIZE; n_w++ ) {
      if ( !mesa_sift_pact_from_buf(&pac_u, buf_y, n_w) ) { *len_w = n_w; break; }
    }
  }
  else if ( met_w >= 4 ) {
    c3_w hed_w = c3_sift_word(buf_y);
    c3_w pre_w = 4 + (((hed_w >> 31) & 1) ? 0 : 6) + 1 + (2 << ((hed_w >> 7) & 3)) + (2 << ((hed_w >> 9) & 3));
    *len_w = c3_max(met_w, pre_w);
  }
  return buf_y;
}

static void
_describe_atom(jbuf* j, u3_noun pac)
{
  c3_w  len_w;
  c3_y* buf_y = _atom_pact(pac, &len_w);
  _describe(j, buf_y, len_w);
  c3_free(buf_y);
}

//  ---- stubs: king, pier and the drivers this tool does not run

void u3je_secp_init(void) {}
void u3je_secp_stop(void) {}
void mdns_init(c3_s p, bool b, char* s, void* f, void* c) {}
void* backtrace_create_state(const char* a, int b, void* c, void* d) { return 0; }
int backtrace_pcinfo(void* a, uintptr_t b, void* c, void* d, void* e) { return 0; }
u3_noun u3_pier_mase(c3_c* cod_c, u3_noun dat) { u3z(dat); return u3_nul; }
u3_noun u3_pier_mass(u3_atom cod, u3_noun lit) { u3z(cod); u3z(lit); return u3_nul; }
void u3_pier_punt_goof(const c3_c* cap_c, u3_noun dud) { u3l_log("goof: %s", cap_c); u3z(dud); }
void u3_pier_punt_ovum(const c3_c* cap_c, u3_noun wir, u3_noun tag) { u3z(wir); u3z(tag); }
void u3_king_bail(void) { fprintf(stderr, "vtool: king bail\n"); _end("bail", EXIT_SETUP); }
void u3_pier_bail(u3_pier* p) { fprintf(stderr, "vtool: pier bail\n"); _end("bail", EXIT_SETUP); }
u3_pier* u3_king_stub(void) { return &pir_u; }
u3_auto* u3_hind_io_init(u3_pier* p) { return 0; }
u3_auto* u3_behn_io_init(u3_pier* p) { return 0; }
u3_auto* u3_conn_io_init(u3_pier* p) { return 0; }
u3_auto* u3_lick_io_init(u3_pier* p) { return 0; }
u3_auto* u3_http_io_init(u3_pier* p) { return 0; }
u3_auto* u3_cttp_io_init(u3_pier* p) { return 0; }
u3_auto* u3_unix_io_init(u3_pier* p) { return 0; }
u3_auto* u3_term_io_init(u3_pier* p) { return 0; }
u3_auto* u3_fore_io_init(u3_pier* p) { return 0; }

//  NAT-PMP would talk to the default gateway: keep every datagram local
#include "natpmp.h"
int initnatpmp(natpmp_t* p, int f, in_addr_t g) { return NATPMP_ERR_CANNOTGETGATEWAY; }
int closenatpmp(natpmp_t* p) { return 0; }
int sendnewportmappingrequest(natpmp_t* p, int r, uint16_t a, uint16_t b, uint32_t l) { return NATPMP_ERR_CANNOTGETGATEWAY; }
int readnatpmpresponseorretry(natpmp_t* p, natpmpresp_t* r) { return NATPMP_ERR_CANNOTGETGATEWAY; }

//  multi-fragment messages need blake3 (urcrypt), which is not linked
void urcrypt_blake3_chunk_output(void) { fprintf(stderr, "vtool: blake3 not linked (multi-fragment message)\n"); _end("unsupported", EXIT_SETUP); }
void urcrypt_blake3_compress(void) { fprintf(stderr, "vtool: blake3 not linked (multi-fragment message)\n"); _end("unsupported", EXIT_SETUP); }
void urcrypt_shay(void) { fprintf(stderr, "vtool: sha-256 not linked\n"); _end("unsupported", EXIT_SETUP); }

//  jet dashboard: none (no nock is run)
static u3j_core _no_dev[] = {{0}};
u3j_dash u3j_Dash = { _no_dev, 0, 0 };

//  ---- --arvo-lanes state (the rules are below, before _arvo_event)

#define ARVO_DEAD_MS   30000    //  +is-peer-dead: ~s30 since last contact
#define ARVO_RETRY_MS  120000   //  +sy-born/+sy-wake: the /mesa/retry timer, ~m2
#define PING_NAT_MS    25000    //  ping.hoon ++nat-timeout: ~s25 after each ack
#define ARVO_CHUMS     256      //  peers the stub remembers (a test has a handful)
#define ARVO_SPONSORS  4        //  ships of our saxo chain we ping (star, galaxy)

static c3_t  arl_t;                    //  --arvo-lanes
static c3_w  ded_w = ARVO_DEAD_MS;     //  --dead-ms
static c3_w  rty_w = ARVO_RETRY_MS;    //  --retry-ms
static c3_w  pnt_w = PING_NAT_MS;      //  --ping-ms
static c3_t  pis_t;                    //  --ping-sponsors
static c3_w  nrd_w = 1;                //  --rounds
static c3_w  gap_w = 0;                //  --round-gap-ms

//  a peer's state as the lane rules need it: lane.per and qos.per
typedef struct {
  c3_d who_d;
  c3_t lan_t;            //  a lane is held
  c3_y hop_y;            //  0: direct
  c3_w pip_w;
  c3_s por_s;
  c3_d con_d;            //  last-contact (loop ms)
  c3_t ded_t;            //  qos %dead
} chum_t;
static chum_t chu_u[ARVO_CHUMS];
static c3_w   chu_w;

static chum_t*
_arl_chum(c3_d who_d)
{
  for ( c3_w i = 0; i < chu_w; i++ ) if ( chu_u[i].who_d == who_d ) return &chu_u[i];
  if ( chu_w == ARVO_CHUMS ) { fprintf(stderr, "vtool: more than %u peers\n", ARVO_CHUMS); _end("unsupported", EXIT_SETUP); }
  chum_t* c = &chu_u[chu_w++];
  memset(c, 0, sizeof(*c));
  c->who_d = who_d;
  return c;
}

//  ---- the stub arvo's work queue: scry answers and events, in order

typedef struct _work {
  u3_peek_cb    fun_f;
  void*         ptr_v;
  u3_noun       ans;
  struct _work* nex_u;
} work;

static work*      wok_u;     //  first
static work*      woq_u;     //  last
static uv_timer_t arv_u;     //  arvo's turn
static c3_t       spn_t;     //  turn scheduled

static void _arvo_turn(uv_timer_t* tim_u);

static void
_arvo_spin(void)
{
  if ( !spn_t ) {
    spn_t = 1;
    uv_timer_start(&arv_u, _arvo_turn, evm_w, 0);
  }
}

void u3_pier_spin(u3_pier* p) { _arvo_spin(); }

static void
_scry_answer(u3_peek_cb fun_f, void* ptr_v, u3_noun ans)
{
  work* w = c3_calloc(sizeof(*w));
  w->fun_f = fun_f; w->ptr_v = ptr_v; w->ans = ans;
  if ( woq_u ) woq_u->nex_u = w; else wok_u = w;
  woq_u = w;
  _arvo_spin();
}

static c3_c*
_path_str(u3_noun pax, c3_c* out_c, c3_w max_w)
{
  c3_w n_w = 0;
  out_c[0] = 0;
  while ( u3_nul != pax && n_w + 2 < max_w ) {
    c3_c* k = u3r_string(u3h(pax));
    n_w += snprintf(out_c + n_w, max_w - n_w, "/%s", k);
    c3_free(k);
    pax = u3t(pax);
  }
  return out_c;
}

//  a ship in a scry path: @p, or 0x... (our scot of a comet)
static c3_t
_knot_ship(u3_noun kno, c3_d* who_d, c3_d* hig_d)
{
  c3_c* k = u3r_string(kno);
  c3_t ok_t = _ship_parse(k, who_d);
  *hig_d = 0;
  if ( !ok_t && '0' == k[0] && 'x' == k[1] && strlen(k) > 2 && strlen(k) <= 34 ) {
    c3_w len_w = strlen(k + 2);
    c3_c lo_c[17] = {0}, hi_c[17] = {0};
    memcpy(lo_c, k + 2 + (len_w > 16 ? len_w - 16 : 0), c3_min(len_w, 16));
    if ( len_w > 16 ) memcpy(hi_c, k + 2, len_w - 16);
    *who_d = strtoull(lo_c, 0, 16);
    *hig_d = hi_c[0] ? strtoull(hi_c, 0, 16) : 0;
    ok_t = 1;
  }
  c3_free(k);
  return ok_t;
}

static c3_w
_lane_of(c3_d who_d)
{
  for ( c3_w i = 0; i < lan_w; i++ ) {
    if ( lan_u[i].who_d == who_d ) return i + 1;
  }
  return 0;
}

static void
_scry_line(const c3_c* pax_c, const c3_c* ans_c)
{
  jbuf j; _jb_init(&j);
  _jb_str(&j, "path", pax_c);
  _jb_str(&j, "answer", ans_c);
  _jb_emit("SCRY", &j);
}

//  arvo's namespace, as far as vere's drivers read it
void
u3_pier_peek_last(u3_pier* p, u3_noun gan, c3_m car_m, u3_atom des, u3_noun pax,
                  void* ptr_v, u3_peek_cb fun_f)
{
  c3_c pax_c[512], ans_c[256];
  c3_c* car_c = u3r_string(car_m);
  c3_c* des_c = u3r_string(des);
  c3_w  n_w = snprintf(pax_c, sizeof(pax_c), "/%s/%s", car_c, des_c);
  _path_str(pax, pax_c + n_w, sizeof(pax_c) - n_w);
  c3_free(car_c); c3_free(des_c);
  u3_noun ans = u3_nul;
  c3_d who_d, hig_d;

  if ( c3__j == car_m && c3__saxo == des && u3_nul != pax && _knot_ship(u3h(pax), &who_d, &hig_d) ) {
    //  /j/saxo/~ship: the sponsorship chain, ship first (a comet's sponsor is a star)
    c3_d cha_d[8]; c3_w n = 0;
    c3_d cur_d = hig_d ? (who_d & 0xffff) : who_d;
    for ( ; ; cur_d = _sein(cur_d) ) { cha_d[n++] = cur_d; if ( cur_d < 0x100 ) break; }
    u3_noun sax = u3_nul;
    c3_w m = snprintf(ans_c, sizeof(ans_c), "%s", hig_d ? _ship_str2(who_d, hig_d) : "");
    for ( c3_w i = 0; i < n; i++ ) m += snprintf(ans_c + m, sizeof(ans_c) - m, "%s%s", (i || hig_d) ? " " : "", _ship_str(cha_d[i]));
    while ( n ) sax = u3nc(u3i_chub(cha_d[--n]), sax);
    if ( hig_d ) { c3_d who_u[2] = { who_d, hig_d }; sax = u3nc(u3i_chubs(2, who_u), sax); }
    ans = u3nt(u3_nul, u3_nul, sax);
  }
  else if ( c3__ax == car_m && 3 == u3qb_lent(pax) && _knot_ship(u3h(u3t(pax)), &who_d, &hig_d) ) {
    c3_c* fir_c = u3r_string(u3h(pax));
    c3_c* las_c = u3r_string(u3h(u3t(u3t(pax))));
    c3_w  idx_w = hig_d ? 0 : _lane_of(who_d);
    c3_d  gal_d = _galaxy(who_d);
    c3_c  lan_c[24] = "";
    c3_w  lip_w = idx_w ? lan_u[idx_w - 1].pip_w : 0;
    c3_s  lor_s = idx_w ? lan_u[idx_w - 1].por_s : 0;
    if ( arl_t && !hig_d ) {
      //  --arvo-lanes: the lane the rules hold (+get-forward-lanes-mesa)
      chum_t* c = _arl_chum(who_d);
      idx_w = c->lan_t; lip_w = c->pip_w; lor_s = c->por_s;
    }
    if ( idx_w ) _lane_str(lan_c, lip_w, lor_s);

    if ( !strcmp(fir_c, "chums") && !strcmp(las_c, "lanes") ) {
      //  /ax//chums/~ship/lanes: [galaxy (list lane)] (mesa)
      u3_noun las = idx_w ? u3nc(u3nt(c3__if, u3i_word(lip_w), lor_s), u3_nul) : u3_nul;
      snprintf(ans_c, sizeof(ans_c), "galaxy %s, %s", _ship_str(gal_d), idx_w ? lan_c : "no lane");
      ans = u3nt(u3_nul, u3_nul, u3nc(u3i_chub(gal_d), las));
    }
    else if ( !strcmp(fir_c, "peers") && !strcmp(las_c, "forward-lane") ) {
      //  /ax//peers/~ship/forward-lane: (list (each galaxy lane)) (ames)
      u3_noun las;
      if ( idx_w ) {
        u3_lane l = { lip_w, lor_s };
        las = u3nc(u3nc(c3n, u3_ames_encode_lane(l)), u3_nul);
        snprintf(ans_c, sizeof(ans_c), "%s", lan_c);
      } else if ( gal_d != our_d ) {
        las = u3nc(u3nc(c3y, u3i_chub(gal_d)), u3_nul);
        snprintf(ans_c, sizeof(ans_c), "galaxy %s", _ship_str(gal_d));
      } else {
        las = u3_nul;
        snprintf(ans_c, sizeof(ans_c), "no lane");
      }
      ans = u3nt(u3_nul, u3_nul, las);
    }
    else {
      snprintf(ans_c, sizeof(ans_c), "none");
    }
    c3_free(fir_c); c3_free(las_c);
  }
  else if ( c3__ax == car_m && 2 == u3qb_lent(pax) ) {
    //  /ax//protocol/version
    snprintf(ans_c, sizeof(ans_c), "0");
    ans = u3nt(u3_nul, u3_nul, 0);
  }
  else if ( c3__a == car_m && c3__veri == des ) {
    snprintf(ans_c, sizeof(ans_c), "yes");
    ans = c3y;
  }
  else {
    snprintf(ans_c, sizeof(ans_c), "none");
  }
  _scry_line(pax_c, ans_c);
  u3z(gan); u3z(des); u3z(pax);
  _scry_answer(fun_f, ptr_v, ans);
}

//  our own pages: [1 %beam %ax [[our ~ [%ud 1]] %mess rif %pact boq %etch %data fag pax]]
void
u3_pier_peek(u3_pier* p, u3_noun gan, u3_noun ful, void* ptr_v, u3_peek_cb fun_f)
{
  u3_noun a, b, c, bem;
  if ( c3n == u3r_qual(ful, &a, &b, &c, &bem) || 1 != a || c3__beam != b || c3__ax != c
       || c3n == u3du(bem) || c3n == u3du(u3t(bem)) || c3__mess != u3h(u3t(bem)) ) {
    _scry_line("/?", "none");
    u3z(gan); u3z(ful);
    _scry_answer(fun_f, ptr_v, u3_nul);
    return;
  }
  u3_noun sky = u3t(u3t(u3t(u3t(ful))));
  u3_noun rif = u3h(u3t(sky));
  u3_noun wer = u3t(u3t(u3t(u3t(u3t(sky)))));
  u3_noun pax = u3t(u3t(wer));
  c3_c pat_c[FINE_PATH_MAX + 2], shw_c[FINE_PATH_MAX + 40];
  _path_str(pax, pat_c, sizeof(pat_c));
  snprintf(shw_c, sizeof(shw_c), "/ax/mess/%s%s", _ship_str(our_d), pat_c);

  u3_noun ans = u3_nul;
  c3_t una_t = una_c && !strncmp(pat_c, una_c, strlen(una_c));
  if ( c3y == ans_o && !una_t ) {
    c3_c* rif_c = u3r_string(rif);
    u3_mesa_pact pac_u; memset(&pac_u, 0, sizeof(pac_u));
    pac_u.hed_u.nex_y = HOP_NONE; pac_u.hed_u.pro_y = MESA_VER;
    pac_u.hed_u.typ_y = PACT_PAGE; pac_u.hed_u.hop_y = 0;
    u3_mesa_name* nam_u = &pac_u.pag_u.nam_u;
    nam_u->her_u[0] = our_d; nam_u->her_u[1] = 0;
    nam_u->rif_w = strtoul(rif_c, 0, 10);
    nam_u->boq_y = 31; nam_u->nit_o = c3n; nam_u->aut_o = c3n; nam_u->fra_d = 0;
    nam_u->pat_c = pat_c + 1; nam_u->pat_s = strlen(pat_c + 1);
    u3_mesa_data* dat_u = &pac_u.pag_u.dat_u;
    dat_u->tob_d = strlen(pag_c); dat_u->len_w = dat_u->tob_d;
    dat_u->aut_u.typ_e = AUTH_SIGN;   //  signed by nobody: 64 zero bytes
    dat_u->fra_y = (c3_y*)pag_c;
    c3_y buf_y[PACT_SIZE];
    c3_w len_w = mesa_etch_pact_to_buf(buf_y, PACT_SIZE, &pac_u);
    ans = u3nt(u3_nul, u3_nul, u3nt(u3i_bytes(len_w, buf_y), u3_nul, 0));
    c3_free(rif_c);
  }
  _scry_line(shw_c, (c3y == ans_o && !una_t) ? "page" : "none");
  u3z(gan); u3z(ful);
  _scry_answer(fun_f, ptr_v, ans);
}

//  ---- the kernel gates vere's drivers call (no pill: written in C)

u3_noun __real_u3v_do(const c3_c* txt_c, u3_noun arg);

u3_noun
__wrap_u3v_do(const c3_c* txt_c, u3_noun arg)
{
  if ( !strcmp(txt_c, "clan:title") ) {
    c3_w met_w = u3r_met(3, arg);
    u3z(arg);
    return (met_w <= 1) ? c3__czar : (met_w <= 2) ? c3__king : (met_w <= 4) ? c3__duke
         : (met_w <= 8) ? c3__earl : c3__pawn;
  }
  if ( !strcmp(txt_c, "rear") ) {
    u3_noun l = arg;
    while ( u3_nul != u3t(l) ) l = u3t(l);
    u3_noun r = u3k(u3h(l));
    u3z(arg);
    return r;
  }
  if ( !strcmp(txt_c, "scot") ) {
    c3_c buf_c[200];
    u3_noun aur = u3h(arg), val = u3t(arg);
    if ( 'p' == aur && u3r_met(6, val) <= 1 ) {
      _patp(u3r_chub(0, val), buf_c);
    } else if ( c3__if == aur ) {
      c3_w w = u3r_word(0, val);
      snprintf(buf_c, sizeof(buf_c), ".%u.%u.%u.%u", w >> 24, (w >> 16) & 255, (w >> 8) & 255, w & 255);
    } else if ( u3r_met(6, val) <= 1 ) {
      snprintf(buf_c, sizeof(buf_c), "%llu", (unsigned long long)u3r_chub(0, val));
    } else {
      c3_w n_w = c3_min(u3r_met(3, val), 64);
      c3_y byt_y[64];
      u3r_bytes(0, n_w, byt_y, val);
      c3_w o = snprintf(buf_c, sizeof(buf_c), "0x");
      for ( c3_i i = n_w - 1; i >= 0; i-- ) o += snprintf(buf_c + o, sizeof(buf_c) - o, "%02x", byt_y[i]);
    }
    u3z(arg);
    return u3i_string(buf_c);
  }
  if ( !strcmp(txt_c, "slaw") ) {
    c3_d who_d;
    c3_c* txt = u3r_string(u3t(arg));
    c3_t ok_t = ('p' == u3h(arg)) && _ship_parse(txt, &who_d);
    c3_free(txt); u3z(arg);
    return ok_t ? u3nc(u3_nul, u3i_chub(who_d)) : u3_nul;
  }
  if ( !strcmp(txt_c, "rush") ) {   //  fine's path parser: no kernel, so no parse
    u3l_log("fine: request dropped (no kernel to parse its path)");
    u3z(arg);
    return u3_nul;
  }
  fprintf(stderr, "vtool: kernel gate %s not in this tool\n", txt_c);
  u3z(arg);
  return u3_nul;
}

//  hoon to evaluate (fine's path parser): no kernel; "rush" above gets nothing
u3_noun
__wrap_u3v_wish(const c3_c* str_c)
{
  return u3_nul;
}

//  ---- sends, receives, galaxy DNS, STUN: wrapped at the link (-Wl,--wrap)

c3_i __real_uv_udp_send(uv_udp_send_t*, uv_udp_t*, const uv_buf_t[], unsigned, const struct sockaddr*, uv_udp_send_cb);

static void
_check_until(const c3_c* kin_c)
{
  if ( unt_c && !strcmp(unt_c, kin_c) ) _end(kin_c, EXIT_OK);
}

c3_i
__wrap_uv_udp_send(uv_udp_send_t* req_u, uv_udp_t* han_u, const uv_buf_t buf_u[],
                   unsigned nbu_i, const struct sockaddr* adr_u, uv_udp_send_cb cb_f)
{
  sockaddr_in to_u = *(const sockaddr_in*)adr_u;
  c3_w pip_w = ntohl(to_u.sin_addr.s_addr);
  c3_s por_s = ntohs(to_u.sin_port);
  c3_t red_t = 0;
  if ( por_s >= 13337 && por_s < 13337 + 256 ) {
    c3_w g = por_s - 13337;
    if ( gap_s[g] && gal_w[g] == pip_w ) { to_u.sin_port = htons(gap_s[g]); red_t = 1; }
  }
  if ( !qui_t ) {
    jbuf j; _jb_init(&j);
    _jb_sock(&j, "to", (struct sockaddr*)&to_u);
    if ( red_t ) _jb_lane(&j, "addressed", pip_w, por_s);
    _jb_num(&j, "from_port", pir_u.por_s);
    _describe(&j, (c3_y*)buf_u[0].base, buf_u[0].len);
    _jb_emit("SEND", &j);
  }
  c3_i ret_i = __real_uv_udp_send(req_u, han_u, buf_u, nbu_i, (struct sockaddr*)&to_u, cb_f);
  _check_until("send");
  return ret_i;
}

c3_i __real_uv_udp_recv_start(uv_udp_t*, uv_alloc_cb, uv_udp_recv_cb);
static uv_udp_recv_cb rec_f;

static void
_recv_cb(uv_udp_t* han_u, ssize_t nrd_i, const uv_buf_t* buf_u, const struct sockaddr* adr_u, unsigned flg_i)
{
  if ( nrd_i > 0 && adr_u && !qui_t ) {
    jbuf j; _jb_init(&j);
    _jb_sock(&j, "from", adr_u);
    _describe(&j, (c3_y*)buf_u->base, nrd_i);
    _jb_emit("RECV", &j);
  }
  rec_f(han_u, nrd_i, buf_u, adr_u, flg_i);
}

c3_i
__wrap_uv_udp_recv_start(uv_udp_t* han_u, uv_alloc_cb all_f, uv_udp_recv_cb rec_cb)
{
  rec_f = rec_cb;
  return __real_uv_udp_recv_start(han_u, all_f, _recv_cb);
}

//  ames resolves <galaxy>.<domain>. for all 256 galaxies; answer at once,
//  from the table, without DNS: numeric addresses, or "not found"
c3_i
__wrap_uv_getaddrinfo(uv_loop_t* lop_u, uv_getaddrinfo_t* req_u, uv_getaddrinfo_cb cb_f,
                      const c3_c* nod_c, const c3_c* ser_c, const struct addrinfo* hin_u)
{
  u3_noun r = (nod_c && strlen(nod_c) > 3) ? u3_po_find_suffix(nod_c[0], nod_c[1], nod_c[2]) : u3_nul;
  c3_w pip_w = 0;
  if ( u3_nul != r && '.' == nod_c[3] ) { pip_w = gal_w[u3t(r)]; }
  u3z(r);
  if ( !pip_w ) {
    return UV_EAI_NONAME;
  }
  struct addrinfo hin = { .ai_family = AF_INET, .ai_flags = AI_NUMERICHOST };
  struct addrinfo* res_u = 0;
  c3_c ip_c[16];
  snprintf(ip_c, sizeof(ip_c), "%u.%u.%u.%u", pip_w >> 24, (pip_w >> 16) & 255, (pip_w >> 8) & 255, pip_w & 255);
  if ( getaddrinfo(ip_c, 0, &hin, &res_u) ) {
    return UV_EAI_NONAME;
  }
  cb_f(req_u, 0, res_u);
  return 0;
}

//  vere's STUN client: a response it accepts, or its giving up
c3_o
__wrap_u3_stun_find_xor_mapped_address(c3_y* buf_y, c3_w len_w, u3_lane* lan_u)
{
  c3_o ret_o = __real_u3_stun_find_xor_mapped_address(buf_y, len_w, lan_u);
  if ( c3y == ret_o ) {
    jbuf j; _jb_init(&j);
    _jb_str(&j, "result", "ok");
    _jb_lane(&j, "mapped", lan_u->pip_w, lan_u->por_s);
    _jb_emit("STUN", &j);
  }
  return ret_o;
}

c3_i __real_uv_timer_start(uv_timer_t*, uv_timer_cb, uint64_t, uint64_t);

c3_i
__wrap_uv_timer_start(uv_timer_t* tim_u, uv_timer_cb cb_f, uint64_t tim_d, uint64_t rep_d)
{
  //  the ames driver's only 5 s timer: _stun_on_lost(), after 39.5 s unanswered
  if ( u3_Host.sam_u && tim_u->data == u3_Host.sam_u && 5000 == tim_d && 0 == rep_d ) {
    jbuf j; _jb_init(&j);
    _jb_str(&j, "result", "fail");
    _jb_str(&j, "why", "no answer for 39.5 s");
    _jb_emit("STUN", &j);
    if ( unt_c && !strcmp(unt_c, "stun") ) _end("stun-failed", EXIT_MISSED);
  }
  return __real_uv_timer_start(tim_u, cb_f, tim_d, rep_d);
}

//  ---- the stub arvo: print each event; ack pokes

static void
_arvo_kick(u3_noun cad)   //  the stub arvo gives an effect
{
  u3_noun act = u3nc(u3nc(u3nc(c3__ames, u3_nul), cad), u3_nul);
  u3_auto_kick(car_u, act);
  u3z(act);
}

static void
_push_page(u3_mesa_name* nam_u, const c3_c* dat_c)
{
  u3_mesa_pact pac_u; memset(&pac_u, 0, sizeof(pac_u));
  pac_u.hed_u.nex_y = HOP_NONE; pac_u.hed_u.pro_y = MESA_VER;
  pac_u.hed_u.typ_y = PACT_PAGE; pac_u.hed_u.hop_y = 0;
  pac_u.pag_u.nam_u = *nam_u;
  pac_u.pag_u.dat_u.tob_d = strlen(dat_c);
  pac_u.pag_u.dat_u.len_w = strlen(dat_c);
  pac_u.pag_u.dat_u.aut_u.typ_e = AUTH_SIGN;
  pac_u.pag_u.dat_u.fra_y = (c3_y*)dat_c;
  c3_y buf_y[PACT_SIZE];
  c3_w len_w = mesa_etch_pact_to_buf(buf_y, PACT_SIZE, &pac_u);
  jbuf j; _jb_init(&j);
  _jb_str(&j, "kind", "push");
  _jb_str(&j, "what", "ack");
  _jb_str(&j, "ship", _her_str(nam_u->her_u));
  _jb_path(&j, "path", nam_u);
  _jb_emit("ARVO", &j);
  _arvo_kick(u3nt(c3__push, u3_nul, u3i_bytes(len_w, buf_y)));
}

//  A2 ames.hoon +sink:fo-call: a message at or below last-acked (and at
//  most 10 behind it) is acked again ("send dupe ack", +fo-send-ack gives
//  the ack page for its seq's name, which vere sends to every lane its
//  pit holds for the name, _mesa_hear_poke having added the poker's).
//  With --arvo-lanes the stub keeps the names of the last DUP_MAX pokes it
//  acked; a poke for one of them is a dupe, acked from any lane.
#define DUP_MAX 64
static struct { c3_d her_d; c3_c pat_c[FINE_PATH_MAX + 2]; } dup_u[DUP_MAX];
static c3_w dup_w;   //  pokes acked so far (dup_u is a ring)

static c3_t
_dupe(u3_mesa_name* nam_u)
{
  c3_c pat_c[FINE_PATH_MAX + 2];
  snprintf(pat_c, sizeof(pat_c), "%.*s", (int)nam_u->pat_s, nam_u->pat_c);
  for ( c3_w i = 0; i < c3_min(dup_w, DUP_MAX); i++ ) {
    if ( dup_u[i].her_d == _ship64(nam_u->her_u) && !strcmp(dup_u[i].pat_c, pat_c) ) return 1;
  }
  return 0;
}

static void
_dupe_add(u3_mesa_name* nam_u)
{
  if ( _dupe(nam_u) ) return;
  c3_w i = dup_w++ % DUP_MAX;
  dup_u[i].her_d = _ship64(nam_u->her_u);
  snprintf(dup_u[i].pat_c, sizeof(dup_u[i].pat_c), "%.*s", (int)nam_u->pat_s, nam_u->pat_c);
}

//  whether arvo accepts a poke from sender snd_d that arrived from pip_w:por_s
static c3_t
_accepts(c3_d snd_d, c3_w pip_w, c3_s por_s)
{
  if ( !acc_w ) return 1;
  for ( c3_w i = 0; i < acc_w; i++ ) {
    if ( acc_u[i].who_d == snd_d && (!acc_u[i].pip_w || acc_u[i].pip_w == pip_w)
         && (!acc_u[i].por_s || acc_u[i].por_s == por_s) ) return 1;
  }
  return 0;
}

//  ---- --arvo-lanes: stock arvo's lane rules (docs/arvo-lanes.md)
//
//  With --arvo-lanes the stub arvo keeps a lane per peer and uses it as
//  urbit/urbit's ames.hoon (000ecc3f, mesa) does; each rule's tag (L1, P1,
//  ...) is its row in docs/arvo-lanes.md, where the arms are cited:
//
//    L1-L5  a page heard (%heer) updates the peer's lane: +ev-update-lane
//    L6     a poke heard updates the poker's lane with next=~: +hear-poke
//    L7-L8  every page sets the peer live; dead after 30 s: +is-peer-dead
//    P1     a request's %push names +make-lanes: [lane], [lane G], or [G]
//    R2     outstanding requests are pushed again every 2 min: +sy-prod
//    N1     a lane change gives vere %nail: +get-forward-lanes-mesa
//    K1-K2  --ping-sponsors: the %ping agent's pokes to the saxo chain
//    A1     ping names carry the message number: +fo-ack-path, +fo-pok-path
//
//  Times are loop milliseconds (uv_now).  The three periods below are arvo's;
//  --dead-ms, --retry-ms and --ping-ms shorten them for tests, as the
//  relay's --direct-lane-expiry compresses its own.

static c3_d _arl_now(void) { return uv_now(u3L); }

//  L8 +is-peer-dead: not a galaxy, and %dead or silent for ded_w
static c3_t
_arl_dead(chum_t* c)
{
  return c->who_d >= 256 && (c->ded_t || _arl_now() >= c->con_d + ded_w);
}

static void
_arl_jb_lane(jbuf* j, c3_t gal_t, c3_d gal_d, c3_w pip_w, c3_s por_s)
{
  c3_c lan_c[24];
  if ( gal_t ) _jb_raw(j, "\"%s\"", _ship_str(gal_d));
  else { _lane_str(lan_c, pip_w, por_s); _jb_raw(j, "\"%s\"", lan_c); }
}

//  N1 %nail: the peer's forward lanes (+get-forward-lanes-mesa): its lane,
//  then its galaxy unless we are it, as (list (each @p address))
static void
_arl_nail(chum_t* c)
{
  c3_d gal_d = _galaxy(c->who_d);
  u3_noun las = (gal_d == our_d) ? u3_nul : u3nc(u3nc(c3y, u3i_chub(gal_d)), u3_nul);
  jbuf j; _jb_init(&j);
  _jb_str(&j, "kind", "nail");
  _jb_str(&j, "ship", _ship_str(c->who_d));
  _jb_key(&j, "lanes"); _jb_raw(&j, "[");
  if ( c->lan_t ) {
    las = u3nc(u3nc(c3n, u3i_chub((c3_d)c->pip_w | ((c3_d)c->por_s << 32))), las);
    _arl_jb_lane(&j, 0, 0, c->pip_w, c->por_s);
  }
  if ( gal_d != our_d ) { if ( c->lan_t ) _jb_raw(&j, ","); _arl_jb_lane(&j, 1, gal_d, 0, 0); }
  _jb_raw(&j, "]");
  _jb_emit("ARVO", &j);
  _arvo_kick(u3nt(c3__nail, u3i_chub(c->who_d), las));
}

//  L1-L5 +ev-update-lane, and L6 for a poke (nex_t = 0); prints the lane
//  when it changes and gives %nail (N1).  Returns whether it changed.
static c3_t
_arl_update_lane(chum_t* c, c3_w pip_w, c3_s por_s, c3_y hop_y, c3_t nex_t, c3_w nip_w, c3_s nor_s, const c3_c* why_c)
{
  if ( c->who_d < 256 ) return 0;                         //  L5: a galaxy's lane never moves
  chum_t old_u = *c;
  const c3_c* rul_c;
  if ( 0 == hop_y ) {                                     //  L1: direct
    c->lan_t = 1; c->hop_y = 0; c->pip_w = pip_w; c->por_s = por_s; rul_c = "L1 hop 0";
  }
  else if ( !nex_t ) {                                    //  L2, L6: relayed, no next-hop: keep
    rul_c = "L2 relayed, no next-hop: kept";
  }
  else if ( c->lan_t && 0 == c->hop_y && c->pip_w == nip_w && c->por_s == nor_s ) {
    rul_c = "L3 next-hop is the direct lane: kept";       //  L3: direct and equal: keep
  }
  else {                                                  //  L3: take the next-hop, indirect
    rul_c = (c->lan_t && 0 == c->hop_y) ? "L3 next-hop replaces the direct lane" : "L3 next-hop";
    c->lan_t = 1; c->hop_y = hop_y; c->pip_w = nip_w; c->por_s = nor_s;
  }
  c3_t chg_t = old_u.lan_t != c->lan_t || old_u.hop_y != c->hop_y || old_u.pip_w != c->pip_w || old_u.por_s != c->por_s;
  jbuf j; _jb_init(&j);
  _jb_str(&j, "kind", "lane");
  _jb_str(&j, "ship", _ship_str(c->who_d));
  _jb_str(&j, "heard", why_c);
  _jb_str(&j, "rule", rul_c);
  if ( c->lan_t ) { _jb_lane(&j, "lane", c->pip_w, c->por_s); _jb_num(&j, "hop", c->hop_y); }
  if ( old_u.lan_t ) { _jb_lane(&j, "was", old_u.pip_w, old_u.por_s); _jb_num(&j, "was_hop", old_u.hop_y); }
  _jb_raw(&j, ",\"changed\":%s", chg_t ? "true" : "false");
  _jb_emit("ARVO", &j);
  if ( chg_t ) _arl_nail(c);
  return chg_t;
}

//  P1 +make-lanes (with +get-sponsor: the galaxy, none when it is us): the
//  lanes of a request's %push, as a noun; their text and the rule into j
static u3_noun
_arl_make_lanes(c3_d who_d, jbuf* j)
{
  c3_d gal_d = _galaxy(who_d);
  c3_t spo_t = gal_d != our_d;
  const c3_c* rul_c;
  u3_noun las = u3_nul;
  c3_t gal_t = 0, lan_t = 0;
  chum_t* c = _arl_chum(who_d);
  if ( who_d < 256 ) { rul_c = "galaxy"; gal_t = 1; }
  else if ( !c->lan_t ) { rul_c = "no lane: galaxy"; gal_t = spo_t; }
  else if ( c->hop_y ) { rul_c = "indirect: lane and galaxy"; lan_t = 1; gal_t = spo_t; }
  else if ( !_arl_dead(c) ) { rul_c = "direct, live: lane"; lan_t = 1; }
  else { rul_c = "direct, dead: lane and galaxy"; lan_t = 1; gal_t = spo_t; }
  if ( gal_t ) las = u3nc(u3i_chub(gal_d), las);
  if ( lan_t ) las = u3nc(u3nt(c3__if, u3i_word(c->pip_w), c->por_s), las);
  _jb_str(j, "rule", rul_c);
  _jb_key(j, "lanes"); _jb_raw(j, "[");
  if ( lan_t ) _arl_jb_lane(j, 0, 0, c->pip_w, c->por_s);
  if ( gal_t ) { if ( lan_t ) _jb_raw(j, ","); _arl_jb_lane(j, 1, gal_d, 0, 0); }
  _jb_raw(j, "]");
  return las;
}

//  the requests arvo has out: --push-peek's rounds and the pings
typedef struct {
  c3_t out_t;               //  outstanding
  c3_d who_d;               //  the ship asked
  c3_c pat_c[256];          //  the name's path (the ack name's, for a poke)
  c3_c inn_c[128];          //  a poke's ack name before sealing (A1)
  c3_y buf_y[PACT_SIZE];    //  the packet
  c3_w len_w;
  c3_c wat_c[8];            //  "peek" or "poke"
  c3_w num_w;               //  round, or message number
  c3_d sen_d;               //  first pushed
} areq_t;

static areq_t rnd_u;                     //  the current round's peek
static areq_t pin_u[ARVO_SPONSORS];      //  one ping flow per sponsor
static c3_w   pin_w;                     //  how many sponsors
static c3_c   pla_c[8] = "nat";          //  the %ping plan: nat, off, one
static c3_w   non_w;                     //  its nonce (ping.hoon +kick-pings)
static c3_c*  rpa_c;                     //  --push-peek's path
static c3_d   rwh_d;                     //  --push-peek's ship
static uv_timer_t rty_u, rnt_u;          //  the retry timer, the round gap
static uv_timer_t pnt_u[ARVO_SPONSORS];  //  each sponsor's ~s25 wait

static void
_arl_push(areq_t* r, c3_t rty_t)
{
  jbuf j; _jb_init(&j);
  _jb_str(&j, "kind", "push");
  _jb_str(&j, "what", r->wat_c);
  _jb_str(&j, "ship", _ship_str(r->who_d));
  _jb_str(&j, "path", r->pat_c);
  if ( r->inn_c[0] ) _jb_str(&j, "inner", r->inn_c);
  _jb_num(&j, !strcmp(r->wat_c, "peek") ? "round" : "seq", r->num_w);
  if ( rty_t ) _jb_raw(&j, ",\"retry\":true");
  u3_noun las = _arl_make_lanes(r->who_d, &j);
  _jb_emit("ARVO", &j);
  if ( !r->out_t ) r->sen_d = _arl_now();
  r->out_t = 1;
  _arvo_kick(u3nt(c3__push, las, u3i_bytes(r->len_w, r->buf_y)));
}

//  round n of --push-peek: a hop-0 peek for SHIP's PATH (PATH/n with --rounds)
static void
_arl_round(c3_w n_w)
{
  areq_t* r = &rnd_u;
  memset(r, 0, sizeof(*r));
  r->who_d = rwh_d; r->num_w = n_w;
  strcpy(r->wat_c, "peek");
  if ( nrd_w > 1 ) snprintf(r->pat_c, sizeof(r->pat_c), "%s/%u", rpa_c, n_w);
  else snprintf(r->pat_c, sizeof(r->pat_c), "%s", rpa_c);
  u3_mesa_pact pac_u; memset(&pac_u, 0, sizeof(pac_u));
  pac_u.hed_u.nex_y = HOP_NONE; pac_u.hed_u.pro_y = MESA_VER;
  pac_u.hed_u.typ_y = PACT_PEEK; pac_u.hed_u.hop_y = 0;
  u3_mesa_name* nam_u = &pac_u.pek_u.nam_u;
  nam_u->her_u[0] = rwh_d; nam_u->boq_y = 13; nam_u->nit_o = c3n; nam_u->aut_o = c3n;
  nam_u->pat_c = r->pat_c + 1; nam_u->pat_s = strlen(r->pat_c + 1);
  r->len_w = mesa_etch_pact_to_buf(r->buf_y, PACT_SIZE, &pac_u);
  _arl_push(r, 0);
}

static void _arl_round_cb(uv_timer_t* tim_u) { _arl_round(rnd_u.num_w + 1); }

//  A1 +make-space-path %chum: a flow's names are sealed into the pair's
//  namespace, /chum/<server-life>/~client/<client-life>/<sealed inner path>,
//  so each message (and each peer) has its own name; vere keys its request
//  table on the path alone.  The stub has no keys: its "seal" is a 64-bit
//  hash of the peer and the inner path, as @uv (the inner path is printed).
static void
_arl_seal(c3_c* out_c, c3_w max_w, c3_d ser_d, c3_d cli_d, const c3_c* inn_c)
{
  c3_c key_c[320];
  c3_w len_w = snprintf(key_c, sizeof(key_c), "%llu %llu %s", (unsigned long long)ser_d, (unsigned long long)cli_d, inn_c);
  c3_w h_w[2];
  MurmurHash3_x86_32(key_c, len_w, 0x6d657361, &h_w[0]);
  MurmurHash3_x86_32(key_c, len_w, 0x63686d75, &h_w[1]);
  c3_d h_d = ((c3_d)h_w[0] << 32) | h_w[1];
  c3_c uv_c[16]; c3_w n_w = 0;
  do { uv_c[n_w++] = "0123456789abcdefghijklmnopqrstuv"[h_d & 31]; h_d >>= 5; } while ( h_d );
  c3_w m_w = snprintf(out_c, max_w, "/chum/1/%s/1/0v", _ship_str(cli_d));
  while ( n_w && m_w + 1 < max_w ) out_c[m_w++] = uv_c[--n_w];
  out_c[m_w] = 0;
}

//  A1: a ping is message seq on flow 0 to sponsor s (+fo-send): its ack is
//  s's /a/x/1//flow/0/ack/bak/~our/seq sealed for [server s, client us],
//  its payload our /a/x/1//flow/0/poke/for/~s/seq sealed for [us, s]
static void
_arl_ping(c3_w i_w)
{
  areq_t* r = &pin_u[i_w];
  r->num_w++;
  strcpy(r->wat_c, "poke");
  c3_c ain_c[128], pin_c[128], pay_c[128];
  snprintf(ain_c, sizeof(ain_c), "/a/x/1//flow/0/ack/bak/%s/%u", _ship_str(our_d), r->num_w);
  snprintf(pin_c, sizeof(pin_c), "/a/x/1//flow/0/poke/for/%s/%u", _ship_str(r->who_d), r->num_w);
  _arl_seal(r->pat_c, sizeof(r->pat_c), r->who_d, our_d, ain_c);
  _arl_seal(pay_c, sizeof(pay_c), our_d, r->who_d, pin_c);
  snprintf(r->inn_c, sizeof(r->inn_c), "%s", ain_c);
  u3_mesa_pact pac_u; memset(&pac_u, 0, sizeof(pac_u));
  pac_u.hed_u.nex_y = HOP_NONE; pac_u.hed_u.pro_y = MESA_VER;
  pac_u.hed_u.typ_y = PACT_POKE; pac_u.hed_u.hop_y = 0;
  u3_mesa_name* ack_u = &pac_u.pok_u.nam_u;
  u3_mesa_name* pay_u = &pac_u.pok_u.pay_u;
  ack_u->her_u[0] = r->who_d; ack_u->boq_y = 13; ack_u->nit_o = c3n; ack_u->aut_o = c3n;
  ack_u->pat_c = r->pat_c + 1; ack_u->pat_s = strlen(r->pat_c + 1);
  pay_u->her_u[0] = our_d; pay_u->boq_y = 13; pay_u->nit_o = c3n; pay_u->aut_o = c3n;
  pay_u->pat_c = pay_c + 1; pay_u->pat_s = strlen(pay_c + 1);
  pac_u.pok_u.dat_u.tob_d = 4; pac_u.pok_u.dat_u.len_w = 4;
  pac_u.pok_u.dat_u.aut_u.typ_e = AUTH_SIGN; pac_u.pok_u.dat_u.fra_y = (c3_y*)"ping";
  r->out_t = 0;
  r->len_w = mesa_etch_pact_to_buf(r->buf_y, PACT_SIZE, &pac_u);
  _arl_push(r, 0);
}

//  ping.hoon +kick-pings: a new nonce, then per plan: nat and one poke
//  every sponsor now (nat again ~s25 after each ack), off nothing
static void
_arl_kick_pings(void)
{
  non_w++;
  jbuf j; _jb_init(&j);
  _jb_str(&j, "kind", "ping");
  _jb_str(&j, "plan", pla_c);
  _jb_emit("ARVO", &j);
  for ( c3_w i = 0; i < pin_w; i++ ) {
    uv_timer_stop(&pnt_u[i]);
    if ( strcmp(pla_c, "off") ) _arl_ping(i);
  }
}

static void _arl_ping_cb(uv_timer_t* tim_u) { if ( !strcmp(pla_c, "nat") ) _arl_ping((c3_w)(uintptr_t)tim_u->data); }

//  R2 +sy-wake/+sy-prod: mark dead peers %dead and push every outstanding
//  request again with +make-lanes (vere ignores it while its own 9 re-sends
//  of the name are under way)
static void
_arl_retry_cb(uv_timer_t* tim_u)
{
  for ( c3_w i = 0; i < chu_w; i++ ) if ( _arl_dead(&chu_u[i]) ) chu_u[i].ded_t = 1;
  if ( rnd_u.out_t ) _arl_push(&rnd_u, 1);
  for ( c3_w i = 0; i < pin_w; i++ ) if ( pin_u[i].out_t ) _arl_push(&pin_u[i], 1);
}

//  L1-L4, L7: a page heard (vere injects the pages of our own requests):
//  update the lane before anything else, set the peer live, then see
//  which request it answers
static void
_arl_hear_page(u3_mesa_pact* pac_u, c3_w pip_w, c3_s por_s)
{
  u3_mesa_name* nam_u = &pac_u->pag_u.nam_u;
  c3_d her_d = _ship64(nam_u->her_u);
  chum_t* c = _arl_chum(her_d);
  c3_t nex_t = HOP_SHORT == pac_u->hed_u.nex_y;
  c3_w nip_w = nex_t ? c3_sift_word(pac_u->pag_u.sot_u) : 0;
  c3_s nor_s = nex_t ? c3_sift_short(pac_u->pag_u.sot_u + 4) : 0;
  _arl_update_lane(c, pip_w, por_s, pac_u->hed_u.hop_y, nex_t, nip_w, nor_s, "page");
  c->con_d = _arl_now(); c->ded_t = 0;                   //  L7
  c3_c pat_c[FINE_PATH_MAX + 2];
  snprintf(pat_c, sizeof(pat_c), "/%.*s", (int)nam_u->pat_s, nam_u->pat_c);

  if ( rnd_u.out_t && her_d == rnd_u.who_d && !strcmp(pat_c, rnd_u.pat_c) ) {
    rnd_u.out_t = 0;
    jbuf j; _jb_init(&j);
    _jb_str(&j, "kind", "answer");
    _jb_num(&j, "round", rnd_u.num_w);
    _jb_str(&j, "ship", _ship_str(her_d));
    _jb_str(&j, "path", pat_c);
    _jb_lane(&j, "from", pip_w, por_s);
    _jb_num(&j, "hops", pac_u->hed_u.hop_y);
    if ( nex_t ) _jb_lane(&j, "next_hop", nip_w, nor_s);
    _jb_num(&j, "ms", _arl_now() - rnd_u.sen_d);
    _jb_emit("ARVO", &j);
    if ( rnd_u.num_w < nrd_w ) uv_timer_start(&rnt_u, _arl_round_cb, gap_w, 0);
    else _check_until("rounds");
  }
  for ( c3_w i = 0; i < pin_w; i++ ) {
    areq_t* r = &pin_u[i];
    if ( r->out_t && her_d == r->who_d && !strcmp(pat_c, r->pat_c) ) {
      r->out_t = 0;                                       //  the ping's ack
      jbuf j; _jb_init(&j);
      _jb_str(&j, "kind", "acked");
      _jb_str(&j, "ship", _ship_str(her_d));
      _jb_num(&j, "seq", r->num_w);
      _jb_str(&j, "inner", r->inn_c);
      _jb_lane(&j, "from", pip_w, por_s);
      _jb_emit("ARVO", &j);
      if ( !strcmp(pla_c, "nat") ) uv_timer_start(&pnt_u[i], _arl_ping_cb, pnt_w, 0);
    }
  }
}

//  L6 +hear-poke: the poker's lane from a poke for us (next=~)
static void
_arl_hear_poke(u3_mesa_pact* pac_u, c3_w pip_w, c3_s por_s)
{
  chum_t* c = _arl_chum(_ship64(pac_u->pok_u.pay_u.her_u));
  _arl_update_lane(c, pip_w, por_s, pac_u->hed_u.hop_y, 0, 0, 0, "poke");
  if ( c->lan_t ) { c->con_d = _arl_now(); c->ded_t = 0; }
  else c->ded_t = 1;
}

//  K2 +sy-stun and ping.hoon +on-poke: %stop turns the pings off, %once
//  (the mapped lane changed) while off pings each sponsor once, %fail
//  turns the 25 s pings back on
static void
_arl_stun(const c3_c* wat_c)
{
  if ( !pis_t ) return;
  if ( !strcmp(wat_c, "stop") ) { strcpy(pla_c, "off"); _arl_kick_pings(); }
  else if ( !strcmp(wat_c, "once") && !strcmp(pla_c, "off") ) { strcpy(pla_c, "one"); _arl_kick_pings(); }
  else if ( !strcmp(wat_c, "fail") ) { strcpy(pla_c, "nat"); _arl_kick_pings(); }
}

//  after READY: seed --lane as direct lanes, start the rounds, the pings
//  (+sy-born pokes %ping %kick) and the 2-minute retry
static void
_arl_start(void)
{
  for ( c3_w i = 0; i < lan_w; i++ ) {
    chum_t* c = _arl_chum(lan_u[i].who_d);
    c->lan_t = 1; c->hop_y = 0; c->pip_w = lan_u[i].pip_w; c->por_s = lan_u[i].por_s; c->con_d = _arl_now();
  }
  uv_timer_init(u3L, &rty_u);
  uv_timer_init(u3L, &rnt_u);
  if ( pis_t ) {
    for ( c3_d s_d = _sein(our_d); our_d >= 256 && pin_w < ARVO_SPONSORS; s_d = _sein(s_d) ) {
      memset(&pin_u[pin_w], 0, sizeof(areq_t));
      pin_u[pin_w].who_d = s_d;
      uv_timer_init(u3L, &pnt_u[pin_w]);
      pnt_u[pin_w].data = (void*)(uintptr_t)pin_w;
      pin_w++;
      if ( s_d < 256 ) break;
    }
    _arl_kick_pings();
  }
  if ( rpa_c ) _arl_round(1);
  uv_timer_start(&rty_u, _arl_retry_cb, rty_w, rty_w);
}

static void
_arvo_event(u3_noun cad)
{
  jbuf j; _jb_init(&j);
  c3_c* tag_c = u3r_string(u3h(cad));
  _jb_str(&j, "kind", tag_c);

  if ( c3__heer == u3h(cad) ) {            //  [%heer [%if ip port] packet]
    u3_noun lan = u3h(u3t(cad)), pac = u3t(u3t(cad));
    _jb_lane(&j, "lane", u3r_word(0, u3h(u3t(lan))), u3r_word(0, u3t(u3t(lan))));
    _describe_atom(&j, pac);
    _jb_emit("EVENT", &j);

    //  arvo acks a poke for us: a page for the poke's name, served from vere's pit;
    //  with --accept, only a poke from an accepted sender and lane
    c3_w len_w;
    c3_y* buf_y = _atom_pact(pac, &len_w);
    u3_mesa_pact pac_u;
    if ( arl_t && !mesa_sift_pact_from_buf(&pac_u, buf_y, len_w) ) {
      c3_w pip_w = u3r_word(0, u3h(u3t(lan)));
      c3_s por_s = u3r_word(0, u3t(u3t(lan)));
      if ( PACT_PAGE == pac_u.hed_u.typ_y ) _arl_hear_page(&pac_u, pip_w, por_s);
      else if ( PACT_POKE == pac_u.hed_u.typ_y && our_d == _ship64(pac_u.pok_u.nam_u.her_u) ) _arl_hear_poke(&pac_u, pip_w, por_s);
    }
    if ( c3y == ans_o && !mesa_sift_pact_from_buf(&pac_u, buf_y, len_w)
         && PACT_POKE == pac_u.hed_u.typ_y && our_d == _ship64(pac_u.pok_u.nam_u.her_u) ) {
      c3_w pip_w = u3r_word(0, u3h(u3t(lan)));
      c3_s por_s = u3r_word(0, u3t(u3t(lan)));
      c3_d snd_d = _ship64(pac_u.pok_u.pay_u.her_u);
      if ( _accepts(snd_d, pip_w, por_s) ) {
        if ( arl_t ) _dupe_add(&pac_u.pok_u.nam_u);
        _push_page(&pac_u.pok_u.nam_u, "ack");
      }
      else if ( arl_t && _dupe(&pac_u.pok_u.nam_u) ) {
        jbuf r; _jb_init(&r);
        _jb_str(&r, "kind", "dupe");
        _jb_str(&r, "ship", _ship_str(snd_d));
        _jb_lane(&r, "lane", pip_w, por_s);
        _jb_path(&r, "path", &pac_u.pok_u.nam_u);
        _jb_emit("ARVO", &r);
        _push_page(&pac_u.pok_u.nam_u, "ack");
      }
      else {
        jbuf r; _jb_init(&r);
        _jb_str(&r, "kind", "refuse");
        _jb_str(&r, "ship", _ship_str(snd_d));
        _jb_lane(&r, "lane", pip_w, por_s);
        _jb_path(&r, "path", &pac_u.pok_u.nam_u);
        _jb_emit("ARVO", &r);
      }
    }
    c3_free(buf_y);
    _check_until("heer");
    _check_until("event");
  }
  else if ( c3__hear == u3h(cad) ) {       //  [%hear [%.n lane] packet]
    u3_noun lan = u3h(u3t(cad)), pac = u3t(u3t(cad));
    if ( c3y == u3du(lan) ) {
      u3_lane l = u3_ames_decode_lane(u3k(u3t(lan)));
      _jb_lane(&j, "lane", l.pip_w, l.por_s);
    }
    _describe_atom(&j, pac);
    _jb_emit("EVENT", &j);
    _check_until("hear");
    _check_until("event");
  }
  else if ( c3__stun == u3h(cad) ) {       //  [%stun ?(%once %stop %fail) galaxy [%.n lane]]
    c3_c* wat_c = u3r_string(u3h(u3t(cad)));
    _jb_str(&j, "what", wat_c);
    _jb_str(&j, "galaxy", _ship_str(u3r_chub(0, u3h(u3t(u3t(cad))))));
    u3_noun lan = u3t(u3t(u3t(cad)));
    if ( c3y == u3du(lan) ) {
      u3_lane l = u3_ames_decode_lane(u3k(u3t(lan)));
      _jb_lane(&j, "lane", l.pip_w, l.por_s);
    }
    _jb_emit("EVENT", &j);
    if ( arl_t ) _arl_stun(wat_c);
    if ( unt_c && !strcmp(unt_c, "stun") ) {
      if ( !strcmp(wat_c, "fail") ) _end("stun-failed", EXIT_MISSED);
      _end("stun", EXIT_OK);
    }
    c3_free(wat_c);
  }
  else {
    _jb_emit("EVENT", &j);
  }
  c3_free(tag_c);
}

static void
_arvo_turn(uv_timer_t* tim_u)
{
  spn_t = 0;
  //  scry answers first, then events: one event per turn with --event-ms
  while ( wok_u ) {
    work* w = wok_u;
    wok_u = w->nex_u;
    if ( !wok_u ) woq_u = 0;
    w->fun_f(w->ptr_v, w->ans);
    c3_free(w);
  }
  u3_noun ovo;
  u3_ovum* egg_u;
  while ( (egg_u = u3_auto_next(car_u, &ovo)) ) {
    _arvo_event(u3t(ovo));
    u3z(ovo);
    u3_auto_done(egg_u);
    if ( evm_w ) break;
  }
  if ( evm_w ) {
    for ( u3_auto* c = car_u; c; c = c->nex_u ) {
      if ( c->ext_u ) { _arvo_spin(); break; }
    }
  }
}

//  ---- command line

static c3_t
_lane_parse(const c3_c* txt_c, c3_w* pip_w, c3_s* por_s)
{
  c3_c ip_c[32]; unsigned por_u; c3_c ext_c;
  struct in_addr a;
  if ( 2 != sscanf(txt_c, "%31[^:]:%u%c", ip_c, &por_u, &ext_c) || por_u > 65535 ) return 0;
  if ( 1 != inet_pton(AF_INET, ip_c, &a) ) return 0;
  *pip_w = ntohl(a.s_addr); *por_s = por_u;
  return 1;
}

static c3_t
_ip_parse(const c3_c* txt_c, c3_w* pip_w)
{
  struct in_addr a;
  if ( 1 != inet_pton(AF_INET, txt_c, &a) ) return 0;
  *pip_w = ntohl(a.s_addr);
  return 1;
}

static void _usage(const c3_c* why_c);

//  a decimal number up to max_d, or a usage error
static c3_d
_num(const c3_c* txt_c, c3_d max_d, const c3_c* wat_c)
{
  c3_c* end_c;
  if ( !*txt_c || !isdigit((c3_y)*txt_c) ) _usage(wat_c);
  c3_d val_d = strtoull(txt_c, &end_c, 10);
  if ( *end_c || val_d > max_d ) _usage(wat_c);
  return val_d;
}

static void
_usage_text(FILE* fil_u)
{
  fprintf(fil_u,
"usage:\n"
"  vtool ship SHIP PORT [--lane SHIP=IP:PORT]... [--galaxy GALAXY[=IP[:PORT]]]...\n"
"                       [--stun-galaxy GALAXY] [--push-peek SHIP/PATH] [--page TEXT]\n"
"                       [--no-answer] [--event-ms MS] [--domain D] [--until WHAT] [--once]\n"
"                       [--accept SHIP[@IP[:PORT]]]... [--unanswered PREFIX]\n"
"                       [--arvo-lanes [--ping-sponsors] [--rounds N] [--round-gap-ms MS]\n"
"                        [--dead-ms MS] [--retry-ms MS] [--ping-ms MS]] [--quiet]\n"
"  vtool peek SHIP PATH IP:PORT [--from PORT] [--bind IP] [--retry S] [--all]\n"
"  vtool poke RCVR SNDR IP:PORT [--from PORT] [--bind IP] [--retry S] [--all] [--data TEXT]\n"
"  vtool publish SHIP PORT [--bind IP] [--data TEXT] [--ping SPONSOR@IP:PORT [--ping-seq N]] [--once]\n"
"  vtool send IP:PORT HEX... [--from PORT] [--bind IP] [--once]\n"
"  vtool version\n"
"  every mode: [--time-limit S] (default 30); ships as @p or decimal\n"
"  WHAT: heer hear event send stun rounds; exit 0 goal met, 1 time limit (or STUN failed),\n"
"        2 usage, 3 could not start\n");
}

static void
_usage(const c3_c* why_c)
{
  if ( why_c ) fprintf(stderr, "vtool: %s\n", why_c);
  _usage_text(stderr);
  exit(EXIT_USAGE);
}

//  a backstop: whatever happens, a run ends 5 s after its time limit
static void
_hard_limit(c3_i num_i)
{
  static const c3_c msg_c[] = "END {\"reason\":\"hard-limit\",\"exit\":1}\n";
  if ( write(1, msg_c, sizeof(msg_c) - 1) ) {}
  _exit(EXIT_MISSED);
}

static void
_arm(void)
{
  signal(SIGALRM, _hard_limit);
  alarm(lim_w + 5);
}

static void
_boot(void)
{
  setvbuf(stdout, 0, _IOLBF, 0);
  u3C.stderr_log_f = _vere_log;
  bot_t = 1;
  u3m_boot_lite(1 << 26);
  bot_t = 0;
  u3C.stderr_log_f = _vere_log;
  u3_Host.lup_u = uv_default_loop();
  u3_Host.ops_u.net = c3y;
  u3_Host.ops_u.jum_y = 23;
}

static void
_limit_cb(uv_timer_t* tim_u)
{
  _end("time-limit", unt_c ? EXIT_MISSED : EXIT_OK);
}

static void
_signal_cb(uv_signal_t* sig_u, c3_i num_i)
{
  _end("signal", EXIT_OK);
}

static c3_c* psh_c;   //  --push-peek SHIP/PATH

static void
_push_peek(void)
{
  c3_c* sla_c = strchr(psh_c, '/');
  c3_c  who_c[64];
  c3_d  who_d;
  if ( !sla_c || sla_c - psh_c >= 64 ) _usage("--push-peek wants SHIP/PATH");
  memcpy(who_c, psh_c, sla_c - psh_c); who_c[sla_c - psh_c] = 0;
  if ( !_ship_parse(who_c, &who_d) ) _usage("--push-peek: bad ship");

  u3_mesa_pact pac_u; memset(&pac_u, 0, sizeof(pac_u));
  pac_u.hed_u.nex_y = HOP_NONE; pac_u.hed_u.pro_y = MESA_VER;
  pac_u.hed_u.typ_y = PACT_PEEK; pac_u.hed_u.hop_y = 0;
  u3_mesa_name* nam_u = &pac_u.pek_u.nam_u;
  nam_u->her_u[0] = who_d; nam_u->boq_y = 13; nam_u->nit_o = c3n; nam_u->aut_o = c3n;
  nam_u->pat_c = sla_c + 1; nam_u->pat_s = strlen(sla_c + 1);
  c3_y buf_y[PACT_SIZE];
  c3_w len_w = mesa_etch_pact_to_buf(buf_y, PACT_SIZE, &pac_u);

  //  arvo sends a request to the ship's galaxy, and to its lane if it has one
  u3_noun las = u3nc(u3i_chub(_galaxy(who_d)), u3_nul);
  c3_w idx_w = _lane_of(who_d);
  if ( idx_w ) {
    las = u3nc(u3nt(c3__if, u3i_word(lan_u[idx_w - 1].pip_w), lan_u[idx_w - 1].por_s), las);
  }
  jbuf j; _jb_init(&j);
  _jb_str(&j, "kind", "push");
  _jb_str(&j, "what", "peek");
  _jb_str(&j, "ship", _ship_str(who_d));
  _jb_str(&j, "path", sla_c);
  _jb_str(&j, "galaxy", _ship_str(_galaxy(who_d)));
  if ( idx_w ) _jb_lane(&j, "lane", lan_u[idx_w - 1].pip_w, lan_u[idx_w - 1].por_s);
  _jb_emit("ARVO", &j);
  _arvo_kick(u3nt(c3__push, las, u3i_bytes(len_w, buf_y)));
}

static c3_i
_ship_main(c3_i argc, c3_c** argv)
{
  c3_w por_w;
  c3_d stn_d = 256;
  c3_t gal_t[256] = {0};

  if ( argc < 4 || !_ship_parse(argv[2], &our_d) ) _usage("ship: SHIP PORT");
  por_w = _num(argv[3], 65535, "ship: bad port");

  for ( c3_i i = 4; i < argc; i++ ) {
    c3_c* a = argv[i];
    c3_c* v = (i + 1 < argc) ? argv[i + 1] : 0;
    if ( !strcmp(a, "--once") ) { unt_c = "event"; continue; }
    if ( !strcmp(a, "--no-answer") ) { ans_o = c3n; continue; }
    if ( !strcmp(a, "--quiet") ) { qui_t = 1; continue; }
    if ( !strcmp(a, "--arvo-lanes") ) { arl_t = 1; continue; }
    if ( !strcmp(a, "--ping-sponsors") ) { pis_t = 1; continue; }
    if ( !v ) _usage("option needs a value");
    i++;
    if ( !strcmp(a, "--time-limit") ) lim_w = _num(v, 86400, "--time-limit: seconds");
    else if ( !strcmp(a, "--until") ) {
      if ( strcmp(v, "heer") && strcmp(v, "hear") && strcmp(v, "event") && strcmp(v, "send") && strcmp(v, "stun") && strcmp(v, "rounds") ) _usage("--until: heer hear event send stun rounds");
      unt_c = v;
    }
    else if ( !strcmp(a, "--page") ) { pag_c = v; if ( strlen(v) > 1024 || !*v ) _usage("--page: 1 to 1024 bytes (one fragment)"); }
    else if ( !strcmp(a, "--event-ms") ) evm_w = _num(v, 60000, "--event-ms: milliseconds");
    else if ( !strcmp(a, "--domain") ) dom_c = v;
    else if ( !strcmp(a, "--unanswered") ) { if ( '/' != *v ) _usage("--unanswered: a path prefix such as /bait"); una_c = v; }
    else if ( !strcmp(a, "--push-peek") ) psh_c = v;
    else if ( !strcmp(a, "--rounds") ) nrd_w = _num(v, 1000, "--rounds: 1 to 1000");
    else if ( !strcmp(a, "--round-gap-ms") ) gap_w = _num(v, 600000, "--round-gap-ms: milliseconds");
    else if ( !strcmp(a, "--dead-ms") ) ded_w = _num(v, 3600000, "--dead-ms: milliseconds");
    else if ( !strcmp(a, "--retry-ms") ) rty_w = _num(v, 3600000, "--retry-ms: milliseconds");
    else if ( !strcmp(a, "--ping-ms") ) pnt_w = _num(v, 3600000, "--ping-ms: milliseconds");
    else if ( !strcmp(a, "--stun-galaxy") ) {
      if ( !_ship_parse(v, &stn_d) || stn_d > 255 ) _usage("--stun-galaxy: a galaxy");
      if ( !gal_t[stn_d] ) gal_t[stn_d] = 1;
    }
    else if ( !strcmp(a, "--galaxy") ) {
      c3_c nam_c[64]; c3_d g_d; c3_w pip_w = 0x7f000001; c3_s por_s = 0;
      c3_c* eq_c = strchr(v, '=');
      snprintf(nam_c, sizeof(nam_c), "%.*s", eq_c ? (int)(eq_c - v) : (int)strlen(v), v);
      if ( !_ship_parse(nam_c, &g_d) || g_d > 255 ) _usage("--galaxy: GALAXY[=IP[:PORT]]");
      if ( eq_c && !strcmp(eq_c + 1, "none") ) pip_w = 0;
      else if ( eq_c && strchr(eq_c + 1, ':') ) {
        if ( !_lane_parse(eq_c + 1, &pip_w, &por_s) ) _usage("--galaxy: bad IP:PORT");
        if ( por_s == 13337 + g_d ) por_s = 0;
      }
      else if ( eq_c && !_ip_parse(eq_c + 1, &pip_w) ) _usage("--galaxy: bad IP");
      gal_w[g_d] = pip_w; gap_s[g_d] = por_s; gal_t[g_d] = 2;
    }
    else if ( !strcmp(a, "--accept") ) {
      c3_c nam_c[64]; c3_c* at_c = strchr(v, '@');
      if ( acc_w == 64 ) _usage("--accept: at most 64");
      snprintf(nam_c, sizeof(nam_c), "%.*s", at_c ? (int)(at_c - v) : (int)strlen(v), v);
      if ( !_ship_parse(nam_c, &acc_u[acc_w].who_d) ) _usage("--accept: SHIP[@IP[:PORT]]");
      acc_u[acc_w].pip_w = 0; acc_u[acc_w].por_s = 0;
      if ( at_c && strchr(at_c + 1, ':') ) {
        if ( !_lane_parse(at_c + 1, &acc_u[acc_w].pip_w, &acc_u[acc_w].por_s) ) _usage("--accept: bad IP:PORT");
      }
      else if ( at_c && !_ip_parse(at_c + 1, &acc_u[acc_w].pip_w) ) _usage("--accept: bad IP");
      acc_w++;
    }
    else if ( !strcmp(a, "--lane") ) {
      c3_c nam_c[64]; c3_c* eq_c = strchr(v, '=');
      if ( !eq_c || lan_w == 64 ) _usage("--lane: SHIP=IP:PORT");
      snprintf(nam_c, sizeof(nam_c), "%.*s", (int)(eq_c - v), v);
      if ( !_ship_parse(nam_c, &lan_u[lan_w].who_d) ) _usage("--lane: bad ship");
      if ( !_lane_parse(eq_c + 1, &lan_u[lan_w].pip_w, &lan_u[lan_w].por_s) ) _usage("--lane: bad IP:PORT");
      lan_w++;
    }
    else _usage("unknown option");
  }

  if ( stn_d < 256 && our_d < 256 ) _usage("--stun-galaxy: galaxies do not STUN; run a star or planet");
  if ( unt_c && !strcmp(unt_c, "stun") && stn_d > 255 ) _usage("--until stun needs --stun-galaxy");
  if ( !nrd_w || !rty_w || !pnt_w ) _usage("--rounds, --retry-ms and --ping-ms: at least 1");
  if ( !arl_t && (pis_t || nrd_w > 1 || (unt_c && !strcmp(unt_c, "rounds"))) ) _usage("--ping-sponsors, --rounds and --until rounds need --arvo-lanes");
  if ( unt_c && !strcmp(unt_c, "rounds") && !psh_c ) _usage("--until rounds needs --push-peek");
  if ( arl_t && psh_c ) {
    c3_c* sla_c = strchr(psh_c, '/');
    c3_c  who_c[64];
    if ( !sla_c || sla_c - psh_c >= 64 || strlen(sla_c) > 200 ) _usage("--push-peek wants SHIP/PATH");
    memcpy(who_c, psh_c, sla_c - psh_c); who_c[sla_c - psh_c] = 0;
    if ( !_ship_parse(who_c, &rwh_d) ) _usage("--push-peek: bad ship");
    rpa_c = sla_c;
  }

  //  galaxies vere may talk to resolve to 127.0.0.1 unless --galaxy says otherwise
  gal_t[_galaxy(our_d)] = gal_t[_galaxy(our_d)] ? gal_t[_galaxy(our_d)] : 1;
  if ( psh_c ) {
    c3_c who_c[64]; c3_d who_d; c3_c* sla_c = strchr(psh_c, '/');
    if ( sla_c && sla_c - psh_c < 64 ) {
      memcpy(who_c, psh_c, sla_c - psh_c); who_c[sla_c - psh_c] = 0;
      if ( _ship_parse(who_c, &who_d) && !gal_t[_galaxy(who_d)] ) gal_t[_galaxy(who_d)] = 1;
    }
  }
  for ( c3_w g = 0; g < 256; g++ ) {
    if ( 1 == gal_t[g] ) gal_w[g] = 0x7f000001;
  }

  _arm();
  pir_u.who_d[0] = our_d; pir_u.who_d[1] = 0;
  pir_u.por_s = por_w; pir_u.fak_o = c3n;
  uv_timer_init(u3L, &arv_u);

  //  vere's own order: init (mesa, then ames), talk (ames, then mesa)
  car_u = u3_auto_init(&pir_u);
  u3_auto_talk(car_u);

  //  what arvo gives after %born: the galaxy domain, and our sponsorship chain
  u3_noun tuf = u3_nul;
  {
    c3_c* d = strdup(dom_c), *s, *sav;
    for ( s = strtok_r(d, ".", &sav); s; s = strtok_r(0, ".", &sav) ) tuf = u3nc(u3i_string(s), tuf);
    c3_free(d);
  }
  {
    jbuf j; _jb_init(&j);
    _jb_str(&j, "kind", "turf");
    _jb_str(&j, "domain", dom_c);
    _jb_emit("ARVO", &j);
    _arvo_kick(u3nt(c3__turf, tuf, u3_nul));
  }
  if ( stn_d < 256 ) {
    jbuf j; _jb_init(&j);
    _jb_str(&j, "kind", "saxo");
    _jb_key(&j, "chain"); _jb_raw(&j, "[\"%s\",\"%s\"]", _ship_str(our_d), _ship_str(stn_d));
    _jb_emit("ARVO", &j);
    _arvo_kick(u3nt(c3__saxo, u3i_chub(our_d), u3nc(stn_d, u3_nul)));
  }

  {
    jbuf j; _jb_init(&j);
    _jb_str(&j, "ship", _ship_str(our_d));
    _jb_num(&j, "port", pir_u.por_s);
    _jb_key(&j, "galaxies"); _jb_raw(&j, "{");
    c3_w n_w = 0;
    for ( c3_w g = 0; g < 256; g++ ) {
      if ( gal_w[g] ) {
        c3_c lan_c[24];
        _lane_str(lan_c, gal_w[g], gap_s[g] ? gap_s[g] : 13337 + g);
        _jb_raw(&j, "%s\"%s\":\"%s\"", n_w++ ? "," : "", _ship_str(g), lan_c);
      }
    }
    _jb_raw(&j, "}");
    if ( stn_d < 256 ) _jb_str(&j, "stun_galaxy", _ship_str(stn_d));
    _jb_emit("READY", &j);
  }
  if ( arl_t ) _arl_start();
  else if ( psh_c ) _push_peek();

  static uv_timer_t lim_u;
  static uv_signal_t sgi_u, sgt_u;
  uv_timer_init(u3L, &lim_u);
  uv_timer_start(&lim_u, _limit_cb, (uint64_t)lim_w * 1000, 0);
  uv_signal_init(u3L, &sgi_u); uv_signal_start(&sgi_u, _signal_cb, SIGINT);
  uv_signal_init(u3L, &sgt_u); uv_signal_start(&sgt_u, _signal_cb, SIGTERM);
  uv_run(u3L, UV_RUN_DEFAULT);
  _end("loop-ended", EXIT_SETUP);
  return EXIT_SETUP;
}

//  ---- peek, poke, publish: plain sockets and vere's packet codec

static volatile sig_atomic_t sig_i;
static void _on_signal(c3_i num_i) { sig_i = num_i; }

static c3_d
_now_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (c3_d)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static c3_i
_sock(c3_w pip_w, c3_s por_s)
{
  c3_i fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in me = {0};
  me.sin_family = AF_INET; me.sin_port = htons(por_s); me.sin_addr.s_addr = htonl(pip_w);
  if ( fd < 0 || bind(fd, (struct sockaddr*)&me, sizeof(me)) ) {
    fprintf(stderr, "vtool: bind %u: %s\n", por_s, strerror(errno));
    _end("bind", EXIT_SETUP);
  }
  return fd;
}

static void
_name(u3_mesa_name* nam_u, c3_d who_d, const c3_c* pat_c)
{
  memset(nam_u, 0, sizeof(*nam_u));
  if ( '/' == *pat_c ) pat_c++;
  nam_u->her_u[0] = who_d; nam_u->her_u[1] = 0;
  nam_u->rif_w = 0; nam_u->boq_y = 13; nam_u->nit_o = c3n; nam_u->aut_o = c3n; nam_u->fra_d = 0;
  nam_u->pat_c = (c3_c*)pat_c; nam_u->pat_s = strlen(pat_c);
}

static void
_send_to(c3_i fd, c3_y* buf_y, c3_w len_w, sockaddr_in* to_u)
{
  jbuf j; _jb_init(&j);
  _jb_sock(&j, "to", (struct sockaddr*)to_u);
  _describe(&j, buf_y, len_w);
  _jb_emit("SEND", &j);
  sendto(fd, buf_y, len_w, 0, (struct sockaddr*)to_u, sizeof(*to_u));
}

static c3_w
_page(c3_y* buf_y, u3_mesa_name* nam_u, const c3_c* dat_c)
{
  u3_mesa_pact pag_u; memset(&pag_u, 0, sizeof(pag_u));
  pag_u.hed_u.nex_y = HOP_NONE; pag_u.hed_u.pro_y = MESA_VER;
  pag_u.hed_u.typ_y = PACT_PAGE; pag_u.hed_u.hop_y = 0;
  pag_u.pag_u.nam_u = *nam_u;
  pag_u.pag_u.dat_u.tob_d = strlen(dat_c);
  pag_u.pag_u.dat_u.aut_u.typ_e = AUTH_SIGN;   //  signed by nobody
  pag_u.pag_u.dat_u.len_w = strlen(dat_c);
  pag_u.pag_u.dat_u.fra_y = (c3_y*)dat_c;
  return mesa_etch_pact_to_buf(buf_y, PACT_SIZE, &pag_u);
}

//  a poke from snd_d to rcv_d: message seq_w (its ack a/x/1//ack/SEQ)
static c3_w
_poke_seq(c3_y* buf_y, c3_d rcv_d, c3_d snd_d, const c3_c* dat_c, c3_w seq_w)
{
  c3_c ack_c[64], pok_c[64];
  snprintf(ack_c, sizeof(ack_c), "a/x/1//ack/%u", seq_w);
  snprintf(pok_c, sizeof(pok_c), "a/x/1//poke/%u", seq_w);
  u3_mesa_pact pac_u; memset(&pac_u, 0, sizeof(pac_u));
  pac_u.hed_u.nex_y = HOP_NONE; pac_u.hed_u.pro_y = MESA_VER;
  pac_u.hed_u.typ_y = PACT_POKE; pac_u.hed_u.hop_y = 0;
  _name(&pac_u.pok_u.nam_u, rcv_d, ack_c);
  _name(&pac_u.pok_u.pay_u, snd_d, pok_c);
  pac_u.pok_u.dat_u.tob_d = strlen(dat_c); pac_u.pok_u.dat_u.aut_u.typ_e = AUTH_SIGN;
  pac_u.pok_u.dat_u.len_w = strlen(dat_c); pac_u.pok_u.dat_u.fra_y = (c3_y*)dat_c;
  return mesa_etch_pact_to_buf(buf_y, PACT_SIZE, &pac_u);
}

//  the one poke of `vtool poke` and `publish --ping`: message 1
static c3_w
_poke(c3_y* buf_y, c3_d rcv_d, c3_d snd_d, const c3_c* dat_c)
{
  return _poke_seq(buf_y, rcv_d, snd_d, dat_c, 1);
}

//  wait up to ms_d for a datagram; 0 on timeout or signal
static ssize_t
_recv(c3_i fd, c3_y* buf_y, c3_w max_w, sockaddr_in* fro_u, c3_d ms_d)
{
  struct pollfd p = { .fd = fd, .events = POLLIN };
  if ( poll(&p, 1, (c3_i)ms_d) <= 0 ) return 0;
  socklen_t fl = sizeof(*fro_u);
  ssize_t n = recvfrom(fd, buf_y, max_w, 0, (struct sockaddr*)fro_u, &fl);
  if ( n > 0 ) {
    jbuf j; _jb_init(&j);
    _jb_sock(&j, "from", (struct sockaddr*)fro_u);
    _describe(&j, buf_y, n);
    _jb_emit("RECV", &j);
  }
  return n;
}

static c3_i
_request_main(c3_i argc, c3_c** argv)
{
  c3_t pek_t = !strcmp(argv[1], "peek");
  c3_d who_d, snd_d = 0;
  c3_w pip_w, bnd_w = 0x7f000001, ret_w = 1000;
  c3_s por_s, fro_s = 0;
  c3_t all_t = 0;
  c3_c* dat_c = "hello";

  if ( argc < 5 ) _usage(pek_t ? "peek: SHIP PATH IP:PORT" : "poke: RCVR SNDR IP:PORT");
  if ( !_ship_parse(argv[2], &who_d) ) _usage("bad ship");
  if ( !pek_t && !_ship_parse(argv[3], &snd_d) ) _usage("bad sender");
  if ( !_lane_parse(argv[4], &pip_w, &por_s) ) _usage("bad IP:PORT");
  for ( c3_i i = 5; i < argc; i++ ) {
    c3_c* a = argv[i];
    c3_c* v = (i + 1 < argc) ? argv[i + 1] : 0;
    if ( !strcmp(a, "--all") ) { all_t = 1; continue; }
    if ( !v ) _usage("option needs a value");
    i++;
    if ( !strcmp(a, "--time-limit") ) lim_w = _num(v, 86400, "--time-limit: seconds");
    else if ( !strcmp(a, "--from") ) fro_s = _num(v, 65535, "--from: a port");
    else if ( !strcmp(a, "--bind") ) { if ( !_ip_parse(v, &bnd_w) ) _usage("--bind: bad IP"); }
    else if ( !strcmp(a, "--retry") ) {
      c3_c* end_c; double sec_d = strtod(v, &end_c);
      if ( *end_c || sec_d < 0 || sec_d > 3600 ) _usage("--retry: seconds");
      ret_w = (c3_w)(sec_d * 1000);
    }
    else if ( !pek_t && !strcmp(a, "--data") ) dat_c = v;
    else _usage("unknown option");
  }

  c3_y buf_y[PACT_SIZE];
  c3_w len_w;
  u3_mesa_name nam_u;   //  the name an answer carries
  if ( pek_t ) {
    u3_mesa_pact pac_u; memset(&pac_u, 0, sizeof(pac_u));
    pac_u.hed_u.nex_y = HOP_NONE; pac_u.hed_u.pro_y = MESA_VER;
    pac_u.hed_u.typ_y = PACT_PEEK; pac_u.hed_u.hop_y = 0;
    _name(&pac_u.pek_u.nam_u, who_d, argv[3]);
    nam_u = pac_u.pek_u.nam_u;
    len_w = mesa_etch_pact_to_buf(buf_y, PACT_SIZE, &pac_u);
  } else {
    len_w = _poke(buf_y, who_d, snd_d, dat_c);
    _name(&nam_u, who_d, "a/x/1//ack/1");
  }

  _arm();
  signal(SIGINT, _on_signal); signal(SIGTERM, _on_signal);
  c3_i fd = _sock(bnd_w, fro_s);
  sockaddr_in to_u = {0};
  to_u.sin_family = AF_INET; to_u.sin_port = htons(por_s); to_u.sin_addr.s_addr = htonl(pip_w);

  c3_d end_d = _now_ms() + (c3_d)lim_w * 1000, nex_d = 0;
  c3_w got_w = 0;
  while ( !sig_i ) {
    c3_d now_d = _now_ms();
    if ( now_d >= nex_d && !got_w ) {
      if ( !nex_d || ret_w ) _send_to(fd, buf_y, len_w, &to_u);
      nex_d = ret_w ? now_d + ret_w : end_d;
    }
    if ( now_d >= end_d ) break;
    if ( got_w ) nex_d = end_d;
    c3_y rec_y[2048]; sockaddr_in fro_u;
    ssize_t n = _recv(fd, rec_y, sizeof(rec_y), &fro_u, c3_min(nex_d, end_d) - now_d);
    u3_mesa_pact pac_u;
    if ( n > 0 && c3y == mesa_is_new_pact(rec_y, n) && !mesa_sift_pact_from_buf(&pac_u, rec_y, n)
         && PACT_PAGE == pac_u.hed_u.typ_y && _ship64(pac_u.pag_u.nam_u.her_u) == who_d
         && pac_u.pag_u.nam_u.pat_s == nam_u.pat_s
         && !memcmp(pac_u.pag_u.nam_u.pat_c, nam_u.pat_c, nam_u.pat_s) ) {
      got_w++;
      if ( !all_t ) _end("answered", EXIT_OK);
    }
  }
  if ( sig_i ) _end("signal", got_w ? EXIT_OK : EXIT_MISSED);
  _end(got_w ? "answered" : "time-limit", got_w ? EXIT_OK : EXIT_MISSED);
  return 0;
}

static c3_i
_publish_main(c3_i argc, c3_c** argv)
{
  c3_d who_d, spo_d = 0;
  c3_w bnd_w = 0x7f000001, spi_w = 0;
  c3_s por_s, sps_s = 0;
  c3_t one_t = 0, pin_t = 0;
  c3_w pse_w = 0;   //  --ping-seq: the first ping's message number (0: every ping message 1)
  c3_c* dat_c = "hello";

  if ( argc < 4 || !_ship_parse(argv[2], &who_d) ) _usage("publish: SHIP PORT");
  por_s = _num(argv[3], 65535, "publish: bad port");
  for ( c3_i i = 4; i < argc; i++ ) {
    c3_c* a = argv[i];
    c3_c* v = (i + 1 < argc) ? argv[i + 1] : 0;
    if ( !strcmp(a, "--once") ) { one_t = 1; continue; }
    if ( !v ) _usage("option needs a value");
    i++;
    if ( !strcmp(a, "--time-limit") ) lim_w = _num(v, 86400, "--time-limit: seconds");
    else if ( !strcmp(a, "--bind") ) { if ( !_ip_parse(v, &bnd_w) ) _usage("--bind: bad IP"); }
    else if ( !strcmp(a, "--data") ) dat_c = v;
    else if ( !strcmp(a, "--ping-seq") ) pse_w = _num(v, 1000000, "--ping-seq: a message number");
    else if ( !strcmp(a, "--ping") ) {
      c3_c nam_c[64]; c3_c* at_c = strchr(v, '@');
      if ( !at_c ) _usage("--ping: SPONSOR@IP:PORT");
      snprintf(nam_c, sizeof(nam_c), "%.*s", (int)(at_c - v), v);
      if ( !_ship_parse(nam_c, &spo_d) || !_lane_parse(at_c + 1, &spi_w, &sps_s) ) _usage("--ping: SPONSOR@IP:PORT");
      pin_t = 1;
    }
    else _usage("unknown option");
  }
  if ( strlen(dat_c) > 1024 ) _usage("--data: at most 1024 bytes");

  _arm();
  signal(SIGINT, _on_signal); signal(SIGTERM, _on_signal);
  c3_i fd = _sock(bnd_w, por_s);
  {
    jbuf j; _jb_init(&j);
    _jb_str(&j, "ship", _ship_str(who_d));
    _jb_lane(&j, "lane", bnd_w, por_s);
    _jb_emit("READY", &j);
  }
  sockaddr_in spo_u = {0};
  spo_u.sin_family = AF_INET; spo_u.sin_port = htons(sps_s); spo_u.sin_addr.s_addr = htonl(spi_w);

  c3_d end_d = _now_ms() + (c3_d)lim_w * 1000, pin_d = 0;
  c3_w ans_w = 0;
  while ( !sig_i ) {
    c3_d now_d = _now_ms();
    if ( now_d >= end_d ) break;
    if ( pin_t && now_d >= pin_d ) {   //  the %ping app: a poke to our sponsor every 25 s
      c3_y pok_y[PACT_SIZE];
      //  --ping-seq: each ping a new message with a name of its own, as
      //  mesa names them (docs/arvo-lanes.md A1); else message 1 every time
      c3_w len_w = pse_w ? _poke_seq(pok_y, spo_d, who_d, "ping", pse_w++) : _poke(pok_y, spo_d, who_d, "ping");
      _send_to(fd, pok_y, len_w, &spo_u);
      pin_d = now_d + 25000;
    }
    c3_y buf_y[2048]; sockaddr_in fro_u;
    c3_d wai_d = end_d - now_d;
    if ( pin_t ) wai_d = c3_min(wai_d, pin_d - now_d);
    ssize_t n = _recv(fd, buf_y, sizeof(buf_y), &fro_u, wai_d);
    u3_mesa_pact pac_u;
    if ( n <= 0 || c3n == mesa_is_new_pact(buf_y, n) || mesa_sift_pact_from_buf(&pac_u, buf_y, n) ) continue;
    u3_mesa_name* nam_u = (PACT_PEEK == pac_u.hed_u.typ_y) ? &pac_u.pek_u.nam_u
                        : (PACT_POKE == pac_u.hed_u.typ_y) ? &pac_u.pok_u.nam_u : 0;
    if ( !nam_u || _ship64(nam_u->her_u) != who_d ) continue;
    c3_y out_y[PACT_SIZE];
    c3_w len_w = _page(out_y, nam_u, (PACT_PEEK == pac_u.hed_u.typ_y) ? dat_c : "ack");
    _send_to(fd, out_y, len_w, &fro_u);
    ans_w++;
    if ( one_t ) _end("answered", EXIT_OK);
  }
  if ( sig_i ) _end("signal", ans_w ? EXIT_OK : EXIT_MISSED);
  _end(ans_w ? "time-limit" : "time-limit-unasked", ans_w ? EXIT_OK : EXIT_MISSED);
  return 0;
}

//  send raw datagrams (hex, one per argument) and print what comes back
static c3_i
_send_main(c3_i argc, c3_c** argv)
{
  c3_w pip_w, bnd_w = 0x7f000001;
  c3_s por_s, fro_s = 0;
  c3_t one_t = 0;
  c3_c* hex_c[16]; c3_w hex_w = 0;

  if ( argc < 4 ) _usage("send: IP:PORT HEX...");
  if ( !_lane_parse(argv[2], &pip_w, &por_s) ) _usage("send: bad IP:PORT");
  for ( c3_i i = 3; i < argc; i++ ) {
    c3_c* a = argv[i];
    c3_c* v = (i + 1 < argc) ? argv[i + 1] : 0;
    if ( !strcmp(a, "--once") ) { one_t = 1; continue; }
    if ( '-' != a[0] ) { if ( hex_w == 16 ) _usage("send: at most 16 datagrams"); hex_c[hex_w++] = a; continue; }
    if ( !v ) _usage("option needs a value");
    i++;
    if ( !strcmp(a, "--time-limit") ) lim_w = _num(v, 86400, "--time-limit: seconds");
    else if ( !strcmp(a, "--from") ) fro_s = _num(v, 65535, "--from: a port");
    else if ( !strcmp(a, "--bind") ) { if ( !_ip_parse(v, &bnd_w) ) _usage("--bind: bad IP"); }
    else _usage("unknown option");
  }
  if ( !hex_w ) _usage("send: no datagram");

  _arm();
  signal(SIGINT, _on_signal); signal(SIGTERM, _on_signal);
  c3_i fd = _sock(bnd_w, fro_s);
  sockaddr_in to_u = {0};
  to_u.sin_family = AF_INET; to_u.sin_port = htons(por_s); to_u.sin_addr.s_addr = htonl(pip_w);
  for ( c3_w k = 0; k < hex_w; k++ ) {
    c3_y buf_y[2048];
    c3_w len_w = strlen(hex_c[k]) / 2;
    if ( (strlen(hex_c[k]) % 2) || len_w > sizeof(buf_y) ) _usage("send: bad hex");
    for ( c3_w i = 0; i < len_w; i++ ) {
      unsigned b;
      if ( 1 != sscanf(hex_c[k] + 2 * i, "%2x", &b) ) _usage("send: bad hex");
      buf_y[i] = b;
    }
    _send_to(fd, buf_y, len_w, &to_u);
  }
  c3_d end_d = _now_ms() + (c3_d)lim_w * 1000;
  c3_w got_w = 0;
  while ( !sig_i ) {
    c3_d now_d = _now_ms();
    if ( now_d >= end_d ) break;
    c3_y buf_y[2048]; sockaddr_in fro_u;
    if ( _recv(fd, buf_y, sizeof(buf_y), &fro_u, end_d - now_d) > 0 ) {
      got_w++;
      if ( one_t ) _end("answered", EXIT_OK);
    }
  }
  if ( sig_i ) _end("signal", got_w ? EXIT_OK : EXIT_MISSED);
  _end(got_w ? "time-limit" : "time-limit-unanswered", got_w ? EXIT_OK : EXIT_MISSED);
  return 0;
}

c3_i
main(c3_i argc, c3_c** argv)
{
  if ( argc < 2 ) _usage(0);
  if ( !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help") ) {
    printf("vtool: vere's UDP drivers (urbit/vere %.10s) with a stub arvo\n", VERE_COMMIT);
    _usage_text(stdout);
    return EXIT_OK;
  }
  if ( !strcmp(argv[1], "version") ) {
    printf("VERSION {\"vere\":\"%s\",\"drivers\":[\"io/mesa.c\",\"io/ames.c\",\"io/ames/stun.c\",\"io/mesa/pact.c\"],\"features\":[\"accept\",\"unanswered\",\"arvo-lanes\",\"quiet\",\"dupe\",\"ping-seq\"]}\n", VERE_COMMIT);
    return EXIT_OK;
  }
  if ( strcmp(argv[1], "ship") && strcmp(argv[1], "peek") && strcmp(argv[1], "poke")
       && strcmp(argv[1], "publish") && strcmp(argv[1], "send") ) _usage("unknown mode");
  _boot();
  if ( !strcmp(argv[1], "ship") ) return _ship_main(argc, argv);
  if ( !strcmp(argv[1], "peek") || !strcmp(argv[1], "poke") ) return _request_main(argc, argv);
  if ( !strcmp(argv[1], "publish") ) return _publish_main(argc, argv);
  if ( !strcmp(argv[1], "send") ) return _send_main(argc, argv);
  _usage("unknown mode");
  return EXIT_USAGE;
}
