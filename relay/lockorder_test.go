package relay

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The lock order of relay.go's package comment ("Locks"), checked where it
// can be from the source: this package's locks are leaves (no call made
// while one is held takes another lock, directly or through a function of
// this package, the route table, the pending table or the verifier), and
// the route and pending tables call nothing that could take a lock of
// another table while they hold theirs (they import nothing of this module
// but lane, and take no function values but route.Table.Each's f). What it
// cannot see: calls through interfaces other than PageVerifier, and a
// function value called under a lock; neither occurs today.

// lockOuter are the locks held around the leaves: the server's batch lock
// (relay.go, "Locks").
var lockOuter = map[string]bool{"rd.batchMu": true}

// lockForeign are the fields and parameters through which this package
// calls the tables of other packages that take locks: the route table, the
// pending table, the amplification budget (relay/amp, whose own locks the
// check reads too) and the signature verifier.
var lockForeign = []string{"routes", "pending", "amp", "pki"}

// lockFreeCalls are the methods of those tables that take no lock (their
// docs say so: the lane clock, the self lanes and the hint networks are
// read without one, Prefetch and IndexSlots are lock-free).
var lockFreeCalls = map[string]bool{
	"Arrived": true, "IsSelf": true, "TargetAllowed": true, "HintAllowed": true,
	"Cap": true, "Prefetch": true, "IndexSlots": true, "Probing": true,
}

func TestLockOrder(t *testing.T) {
	fset := token.NewFileSet()
	var files []*ast.File
	// This package's files and relay/amp's: the budget's stripes are
	// leaves as this package's locks are.
	names, err := filepath.Glob("*.go")
	ampNames, err2 := filepath.Glob("amp/*.go")
	if err != nil || err2 != nil || len(names) == 0 || len(ampNames) == 0 {
		t.Fatalf("listing the packages' files: %v %v (%d, %d files)", err, err2, len(names), len(ampNames))
	}
	names = append(names, ampNames...)
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	bad := lockViolations(fset, files)
	for _, b := range bad {
		t.Error(b)
	}
	// The check must see the locks it is about: a parse that found none
	// would pass anything.
	if n := countLockCalls(files); n < 10 {
		t.Fatalf("found only %d Lock calls in the package: the check sees nothing", n)
	}
}

// TestBatchLockHeld: the server's reader decides and sends a batch under
// its batch lock (sockReader.batchMu), as the package comment says, so that
// Close, which takes it, waits the batch out: every decision, every write
// and every call to the capture writer and the decision log in
// routineRead is made with rd.batchMu held.
func TestBatchLockHeld(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "server.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	under := map[string]int{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != "routineRead" {
			continue
		}
		w := lockWalker{fset: fset, fn: fd.Name.Name, locking: map[string]bool{}}
		w.seen = func(call string, held map[string]bool) {
			for _, c := range []string{"s.relay.Handle", "s.relay.HandleFromShip", "s.writeAll", "s.cfg.Tap", "s.cfg.Decisions.Log", "out.Split", "out.Reset"} {
				if call != c {
					continue
				}
				if !held["rd.batchMu"] {
					t.Errorf("routineRead calls %s without its batch lock", call)
				}
				under[call]++
			}
		}
		w.block(fd.Body.List, map[string]bool{})
	}
	// The check must see the calls it is about.
	for _, c := range []string{"s.relay.Handle", "s.relay.HandleFromShip", "s.writeAll", "s.cfg.Decisions.Log"} {
		if under[c] == 0 {
			t.Errorf("routineRead: no call of %s seen", c)
		}
	}
}

// TestLockOrderCatches: the check finds each kind of violation it is for,
// and passes the patterns this package uses.
func TestLockOrderCatches(t *testing.T) {
	const src = `package x
func (t *vouchTable) pinUnder(r *Relay) { t.mu.Lock(); defer t.mu.Unlock(); r.routes.Pin(s, k) }
func (t *tab) nested() { t.mu.Lock(); t.o.mu.Lock(); t.o.mu.Unlock(); t.mu.Unlock() }
func (t *tab) viaHelper() { t.mu.Lock(); t.helper(); t.mu.Unlock() }
func (t *tab) helper() { t.o.mu.Lock(); t.o.mu.Unlock() }
func (t *tab) inIf(r *Relay) { t.mu.Lock(); if x { r.pending.Add(1) }; t.mu.Unlock() }
func (t *tab) ok(r *Relay) { t.mu.Lock(); t.mu.Unlock(); r.routes.Pin(s, k) }
func (t *tab) okFree(r *Relay) { t.mu.Lock(); r.routes.IsSelf(&k); t.mu.Unlock() }
func (t *tab) okEarly(r *Relay) { t.mu.Lock(); if x { t.mu.Unlock(); return }; t.mu.Unlock(); r.routes.Pin(s, k) }
func (t *tab) okRelock() { t.mu.Lock(); if x { t.mu.Unlock(); t.helper(); t.mu.Lock() }; t.mu.Unlock() }
func (s *Server) okOuter(rd *sockReader) { rd.batchMu.Lock(); s.relay.routes.Pin(s, k); rd.batchMu.Unlock() }
func (t *tab) outerUnder(rd *sockReader) { t.mu.Lock(); rd.batchMu.Lock(); rd.batchMu.Unlock(); t.mu.Unlock() }
func (s *Server) twoOuter(a, rd *sockReader) { a.batchMu.Lock(); rd.batchMu.Lock(); rd.batchMu.Unlock(); a.batchMu.Unlock() }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := lockViolations(fset, []*ast.File{f})
	want := []string{"pinUnder", "nested", "viaHelper", "inIf", "outerUnder", "twoOuter"}
	var funcs []string
	for _, g := range got {
		funcs = append(funcs, strings.Fields(g)[1])
	}
	if !slices.Equal(funcs, want) {
		t.Errorf("violations in %q, want %q:\n%s", funcs, want, strings.Join(got, "\n"))
	}
}

// TestLockLeavesImport: the route and pending tables and the amplification
// budget import nothing of this
// module but lane, and their exported functions take no function value to
// call (route.Table.Each's f excepted), so no lock of this package or of the other table can be
// taken under theirs.
func TestLockLeavesImport(t *testing.T) {
	const mod = "github.com/urbit-relay/relay/"
	for dir, allowFunc := range map[string][]string{"pit": nil, "route": {"Each"}, "amp": nil} {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(names) == 0 {
			t.Fatalf("listing %s: %v (%d files)", dir, err, len(names))
		}
		for _, n := range names {
			if strings.HasSuffix(n, "_test.go") {
				continue
			}
			src, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, n, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if strings.HasPrefix(p, mod) && p != mod+"lane" {
					t.Errorf("%s imports %s: a lock of it could be taken under the table's", n, p)
				}
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				// Only an exported function can be given a value
				// from outside, which could take another lock.
				if !ok || !fd.Name.IsExported() || slices.Contains(allowFunc, fd.Name.Name) {
					continue
				}
				for _, p := range fd.Type.Params.List {
					if _, ok := p.Type.(*ast.FuncType); ok {
						t.Errorf("%s: %s takes a function value, which it could call under its lock", fset.Position(fd.Pos()), fd.Name.Name)
					}
				}
			}
		}
	}
}

// lockViolations returns, as "file:line func: what", every call in files
// made while a lock other than an outer one is held that takes a lock.
func lockViolations(fset *token.FileSet, files []*ast.File) []string {
	// Functions by name (methods of any receiver merged: conservative).
	bodies := map[string][]*ast.BlockStmt{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				bodies[fd.Name.Name] = append(bodies[fd.Name.Name], fd.Body)
			}
		}
	}
	// locking: the names of functions that take a lock, directly or
	// through another, to a fixed point.
	locking := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for name, bs := range bodies {
			if locking[name] {
				continue
			}
			for _, b := range bs {
				ast.Inspect(b, func(n ast.Node) bool {
					if c, ok := n.(*ast.CallExpr); ok && callLocks(c, locking) {
						locking[name] = true
					}
					return !locking[name]
				})
			}
			changed = changed || locking[name]
		}
	}
	var out []string
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			w := lockWalker{fset: fset, fn: fd.Name.Name, locking: locking}
			w.block(fd.Body.List, map[string]bool{})
			out = append(out, w.bad...)
		}
	}
	return out
}

// callLocks reports whether call c takes a lock: a Lock or RLock, a
// method of another package's table that is not lock-free, or a function
// of this package in locking.
func callLocks(c *ast.CallExpr, locking map[string]bool) bool {
	switch fn := c.Fun.(type) {
	case *ast.Ident:
		return locking[fn.Name]
	case *ast.SelectorExpr:
		name := fn.Sel.Name
		if name == "Lock" || name == "RLock" {
			return true
		}
		if chainHas(fn.X, lockForeign) {
			return !lockFreeCalls[name]
		}
		return locking[name]
	}
	return false
}

// chainHas reports whether selector chain x names one of idents.
func chainHas(x ast.Expr, idents []string) bool {
	for {
		switch e := x.(type) {
		case *ast.Ident:
			return slices.Contains(idents, e.Name)
		case *ast.SelectorExpr:
			if slices.Contains(idents, e.Sel.Name) {
				return true
			}
			x = e.X
		default:
			return false
		}
	}
}

// lockCall returns the lock expression and the method of a Lock, RLock,
// Unlock or RUnlock call statement.
func lockCall(s ast.Stmt) (lock, method string, ok bool) {
	es, ok := s.(*ast.ExprStmt)
	if !ok {
		return "", "", false
	}
	c, ok := es.X.(*ast.CallExpr)
	if !ok {
		return "", "", false
	}
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", "", false
	}
	switch m := sel.Sel.Name; m {
	case "Lock", "RLock", "Unlock", "RUnlock":
		return exprString(sel.X), m, true
	}
	return "", "", false
}

func exprString(x ast.Expr) string {
	switch e := x.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return "?"
}

// lockWalker walks one function's statements in order, tracking the locks
// held (a lock is held from its Lock to its Unlock in the same or an
// enclosing block, or to the function's end after a deferred Unlock).
type lockWalker struct {
	fset    *token.FileSet
	fn      string
	locking map[string]bool
	bad     []string
	// seen, when set, is told of every call walked (not in function
	// literals) with the locks held at it.
	seen func(call string, held map[string]bool)
}

// inner returns the leaf locks in held.
func inner(held map[string]bool) []string {
	var ls []string
	for l := range held {
		if !lockOuter[l] {
			ls = append(ls, l)
		}
	}
	slices.Sort(ls)
	return ls
}

// block walks stmts with held, which it updates, and reports whether the
// block ends the function or the loop (return, branch, panic).
func (w *lockWalker) block(stmts []ast.Stmt, held map[string]bool) (ends bool) {
	for _, s := range stmts {
		if l, m, ok := lockCall(s); ok {
			switch m {
			case "Lock", "RLock":
				if in := inner(held); len(in) > 0 && !lockOuter[l] {
					w.report(s, l+"."+m+" while holding "+strings.Join(in, ", "))
				}
				if lockOuter[l] && len(held) > 0 {
					// The batch lock is outermost: taken under nothing,
					// not even another reader's.
					w.report(s, l+"."+m+" (outer) while holding "+strings.Join(slices.Sorted(maps.Keys(held)), ", "))
				}
				held[l] = true
			default:
				delete(held, l)
			}
			continue
		}
		if w.stmt(s, held) {
			return true
		}
	}
	return false
}

// branch walks a nested block on a copy of held and adds what it leaves
// held, unless the block ends, to into.
func (w *lockWalker) branch(stmts []ast.Stmt, held, into map[string]bool) {
	h := maps.Clone(held)
	if !w.block(stmts, h) {
		maps.Copy(into, h)
	}
}

// stmt walks s with held, and reports whether it ends the block.
func (w *lockWalker) stmt(s ast.Stmt, held map[string]bool) bool {
	switch s := s.(type) {
	case *ast.BlockStmt:
		return w.block(s.List, held)
	case *ast.IfStmt:
		w.exprs(held, s.Init, s.Cond)
		after := map[string]bool{}
		w.branch(s.Body.List, held, after)
		switch e := s.Else.(type) {
		case nil:
			maps.Copy(after, held)
		case *ast.BlockStmt:
			w.branch(e.List, held, after)
		default:
			w.branch([]ast.Stmt{e}, held, after)
		}
		clear(held)
		maps.Copy(held, after)
	case *ast.ForStmt:
		w.exprs(held, s.Init, s.Cond, s.Post)
		w.branch(s.Body.List, held, held)
	case *ast.RangeStmt:
		w.exprs(held, s.X)
		w.branch(s.Body.List, held, held)
	case *ast.SwitchStmt:
		w.exprs(held, s.Init, s.Tag)
		w.clauses(s.Body, held)
	case *ast.TypeSwitchStmt:
		w.exprs(held, s.Init, s.Assign)
		w.clauses(s.Body, held)
	case *ast.SelectStmt:
		w.clauses(s.Body, held)
	case *ast.DeferStmt:
		// A deferred Unlock keeps the lock to the function's end; other
		// deferred calls are not judged.
	case *ast.ReturnStmt:
		w.exprs(held, s)
		return true
	case *ast.BranchStmt:
		return true
	case *ast.LabeledStmt:
		return w.stmt(s.Stmt, held)
	default:
		w.exprs(held, s)
		if es, ok := s.(*ast.ExprStmt); ok {
			if c, ok := es.X.(*ast.CallExpr); ok {
				if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "panic" {
					return true
				}
			}
		}
	}
	return false
}

// clauses walks a switch's or select's clauses, each on a copy of held.
func (w *lockWalker) clauses(body *ast.BlockStmt, held map[string]bool) {
	after := map[string]bool{}
	hasDefault := false
	for _, c := range body.List {
		switch c := c.(type) {
		case *ast.CaseClause:
			hasDefault = hasDefault || c.List == nil
			for _, e := range c.List {
				w.exprs(held, e)
			}
			w.branch(c.Body, held, after)
		case *ast.CommClause:
			hasDefault = hasDefault || c.Comm == nil
			w.branch(c.Body, held, after)
		}
	}
	if !hasDefault {
		maps.Copy(after, held)
	}
	clear(held)
	maps.Copy(held, after)
}

// exprs reports every call in nodes (not in function literals) that takes
// a lock while a leaf lock is held.
func (w *lockWalker) exprs(held map[string]bool, nodes ...ast.Node) {
	in := inner(held)
	if len(in) == 0 && w.seen == nil {
		return
	}
	for _, n := range nodes {
		if n == nil || n == ast.Node((*ast.BlockStmt)(nil)) {
			continue
		}
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false
			case *ast.CallExpr:
				if w.seen != nil {
					w.seen(exprString(n.Fun), held)
				}
				if len(in) > 0 && callLocks(n, w.locking) {
					w.report(n, "a call that takes a lock ("+exprString(n.Fun)+") while holding "+strings.Join(in, ", "))
				}
			}
			return true
		})
	}
}

func (w *lockWalker) report(n ast.Node, what string) {
	w.bad = append(w.bad, w.fset.Position(n.Pos()).String()+" "+w.fn+" "+what)
}

// countLockCalls counts the Lock calls in files.
func countLockCalls(files []*ast.File) int {
	n := 0
	for _, f := range files {
		ast.Inspect(f, func(x ast.Node) bool {
			if c, ok := x.(*ast.CallExpr); ok {
				if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Lock" {
					n++
				}
			}
			return true
		})
	}
	return n
}
