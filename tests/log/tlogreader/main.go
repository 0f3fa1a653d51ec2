// Command tlogreader reads a C2SP tlog-tiles log over HTTP with a reader that is not Fairshoe's:
// golang.org/x/mod/sumdb/note for the checkpoint's signature and golang.org/x/mod/sumdb/tlog
// (Debian's golang-golang-x-mod-dev) for the tiles and every proof.
//
//	tlogreader -prefix URL -vkey VKEY [-old CHECKPOINT_FILE] [-record N]
//
// It fetches <prefix>checkpoint, opens it with the log's vkey, and then, through tlog's own
// TileHashReader over tlog.TileReader (x/mod's tile paths mapped to tlog-tiles': x/mod writes
// tile/<H>/<L>/<N> and tile/<H>/data/<N>, tlog-tiles tile/<L>/<N> and tile/entries/<N>):
//   - recomputes the tree hash from the tiles (tlog.TreeHash) and compares it to the checkpoint's;
//   - reads every entry bundle, and proves each record's inclusion (tlog.ProveRecord, then
//     tlog.CheckRecord against tlog.RecordHash of the entry);
//   - with -old, opens that earlier checkpoint with the same key and proves the new tree extends
//     it (tlog.ProveTree, tlog.CheckTree).
//
// It prints one JSON object (origin, size, root, records checked, the -record entry in base64)
// and exits 0, or prints the failure on stderr and exits 1.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const height = 8 // tlog-tiles' tiles are 8 levels high, 256 hashes wide

type checkpoint struct {
	origin string
	tree   tlog.Tree
}

var client = &http.Client{Timeout: 30 * time.Second}

func get(url string) ([]byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<24))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// openCheckpoint verifies a checkpoint note with the log's key and parses its text: origin, size,
// base64 root hash, then extension lines (tlog.ParseTree reads only go.sum's own header).
func openCheckpoint(msg []byte, verifier note.Verifier) (checkpoint, error) {
	n, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		return checkpoint{}, fmt.Errorf("checkpoint signature: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(n.Text, "\n"), "\n")
	if len(lines) < 3 {
		return checkpoint{}, errors.New("checkpoint has fewer than 3 lines")
	}
	if lines[0] != verifier.Name() {
		return checkpoint{}, fmt.Errorf("checkpoint origin %q is not the key's name %q", lines[0], verifier.Name())
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return checkpoint{}, fmt.Errorf("checkpoint size %q", lines[1])
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		return checkpoint{}, fmt.Errorf("checkpoint root %q: %w", lines[2], err)
	}
	return checkpoint{lines[0], tlog.Tree{N: size, Hash: root}}, nil
}

// tilesPath maps x/mod's tile path to tlog-tiles': drop the height, "data" is "entries".
func tilesPath(t tlog.Tile) string {
	p := strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", height))
	if t.L == -1 {
		p = "entries/" + strings.TrimPrefix(p, "data/")
	}
	return "tile/" + p
}

// tileReader is x/mod's TileReader over HTTP; it keeps the tiles tlog has confirmed
// (SaveTiles) and counts what it fetched.
type tileReader struct {
	prefix  string
	fetched int
	saved   map[tlog.Tile][]byte
}

func (r *tileReader) Height() int { return height }

func (r *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		if data, ok := r.saved[t]; ok {
			out[i] = data
			continue
		}
		data, err := get(r.prefix + tilesPath(t))
		if err != nil {
			return nil, err
		}
		if len(data) != t.W*tlog.HashSize {
			return nil, fmt.Errorf("%s: %d bytes, want %d", tilesPath(t), len(data), t.W*tlog.HashSize)
		}
		out[i] = data
		r.fetched++
	}
	return out, nil
}

func (r *tileReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {
	for i, t := range tiles {
		r.saved[t] = data[i]
	}
}

// bundle reads the entry bundle of leaves [n*256, n*256+w): uint16-length-prefixed entries.
func bundle(prefix string, n int64, w int) ([][]byte, error) {
	t := tlog.Tile{H: height, L: -1, N: n, W: w}
	data, err := get(prefix + tilesPath(t))
	if err != nil {
		return nil, err
	}
	var entries [][]byte
	for len(data) > 0 {
		if len(data) < 2 {
			return nil, fmt.Errorf("%s: ends inside a length", tilesPath(t))
		}
		size := int(binary.BigEndian.Uint16(data))
		if len(data) < 2+size {
			return nil, fmt.Errorf("%s: ends inside an entry", tilesPath(t))
		}
		entries = append(entries, data[2:2+size])
		data = data[2+size:]
	}
	if len(entries) != w {
		return nil, fmt.Errorf("%s: %d entries, want %d", tilesPath(t), len(entries), w)
	}
	return entries, nil
}

func run() error {
	prefix := flag.String("prefix", "", "the log's URL prefix, ending in /")
	vkey := flag.String("vkey", "", "the log's signed-note verifier key")
	oldPath := flag.String("old", "", "an earlier checkpoint of the log, to prove consistency with")
	record := flag.Int64("record", -1, "print this record's entry (base64)")
	flag.Parse()
	verifier, err := note.NewVerifier(*vkey)
	if err != nil {
		return fmt.Errorf("vkey: %w", err)
	}
	msg, err := get(*prefix + "checkpoint")
	if err != nil {
		return err
	}
	cp, err := openCheckpoint(msg, verifier)
	if err != nil {
		return err
	}
	tree := cp.tree
	reader := &tileReader{prefix: *prefix, saved: map[tlog.Tile][]byte{}}
	hashes := tlog.TileHashReader(tree, reader)
	root, err := tlog.TreeHash(tree.N, hashes)
	if err != nil {
		return fmt.Errorf("tree hash from the tiles: %w", err)
	}
	if root != tree.Hash {
		return fmt.Errorf("tiles hash to %v, checkpoint says %v", root, tree.Hash)
	}
	result := map[string]interface{}{"origin": cp.origin, "size": tree.N,
		"root": tree.Hash.String()}
	checked := int64(0)
	for n := int64(0); n*256 < tree.N; n++ {
		w := int64(256)
		if tree.N-n*256 < w {
			w = tree.N - n*256
		}
		entries, err := bundle(*prefix, n, int(w))
		if err != nil {
			return err
		}
		for i, entry := range entries {
			index := n*256 + int64(i)
			proof, err := tlog.ProveRecord(tree.N, index, hashes)
			if err != nil {
				return fmt.Errorf("record %d: proof: %w", index, err)
			}
			if err := tlog.CheckRecord(proof, tree.N, tree.Hash, index, tlog.RecordHash(entry)); err != nil {
				return fmt.Errorf("record %d: inclusion: %w", index, err)
			}
			if index == *record {
				result["record"] = base64.StdEncoding.EncodeToString(entry)
			}
			checked++
		}
	}
	result["records_checked"] = checked
	if *oldPath != "" {
		oldMsg, err := os.ReadFile(*oldPath)
		if err != nil {
			return err
		}
		old, err := openCheckpoint(oldMsg, verifier)
		if err != nil {
			return fmt.Errorf("old %w", err)
		}
		if old.tree.N > tree.N {
			return fmt.Errorf("old checkpoint's size %d is beyond the log's %d", old.tree.N, tree.N)
		}
		proof, err := tlog.ProveTree(tree.N, old.tree.N, hashes)
		if err != nil {
			return fmt.Errorf("consistency proof: %w", err)
		}
		if err := tlog.CheckTree(proof, tree.N, tree.Hash, old.tree.N, old.tree.Hash); err != nil {
			return fmt.Errorf("consistency with the old checkpoint: %w", err)
		}
		result["consistent_with"] = old.tree.N
	}
	result["tiles_fetched"] = reader.fetched
	var out bytes.Buffer
	if err := json.NewEncoder(&out).Encode(result); err != nil {
		return err
	}
	_, err = os.Stdout.Write(out.Bytes())
	return err
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tlogreader:", err)
		os.Exit(1)
	}
}
