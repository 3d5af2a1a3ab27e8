package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/collypace/ext"
)

// deferredColumns are the columns of deferred in the order decodeDeferredRow reads them.
const deferredColumns = "id, host, method, url, depth, header, body, body_lost, ctx, deferred_at, reason"

const numDeferredColumns = 11

// spilledColumns are the columns of spilled in deferredColumns' order, with no reason.
const spilledColumns = "id, host, method, url, depth, header, body, body_lost, ctx, spilled_at, ''"

const addDeferredSQL = `INSERT INTO deferred (host, method, url, depth, header, body, body_lost, ctx, deferred_at, reason)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

const addSpilledSQL = `INSERT INTO spilled (host, method, url, depth, header, body, body_lost, ctx, spilled_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

// requestArgs returns r's values for the columns a deferred and a spilled row share, from host to the
// time it was deferred or spilled.
func requestArgs(r ext.DeferredRequest) ([]any, error) {
	header, err := json.Marshal(r.Header)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	rctx, err := json.Marshal(r.Ctx)
	if err != nil {
		return nil, fmt.Errorf("ctx: %w", err)
	}
	var body any // NULL: no body
	if r.Body != nil {
		body = r.Body
	}
	return []any{r.Host, r.Method, r.URL, int64(r.Depth), string(header), body, encodeBool(r.BodyLost), string(rctx),
		encodeTime(r.DeferredAt)}, nil
}

// AddDeferred implements ext.Store.
func (s *Store) AddDeferred(ctx context.Context, r ext.DeferredRequest) (int64, error) {
	args, err := requestArgs(r)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: add deferred: %w", err)
	}
	res, err := s.addDefer.ExecContext(ctx, append(args, r.Reason)...)
	if err != nil {
		return 0, wrap(ctx, "add deferred", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, wrap(ctx, "add deferred", err)
	}
	return id, nil
}

// ListDeferred implements ext.Store: up to limit requests (limit <= 0: all), oldest first, of host
// ("": every host). A row whose method or URL is unusable is left out, and the rows that could be
// decoded are returned with an error wrapping ext.ErrCorruptState that names it: use them.
func (s *Store) ListDeferred(ctx context.Context, host string, limit int) ([]ext.DeferredRequest, error) {
	n := int64(-1) // SQLite: no limit
	if limit > 0 {
		n = int64(limit)
	}
	var rows *sql.Rows
	var err error
	if host == "" {
		rows, err = s.listAll.QueryContext(ctx, n)
	} else {
		rows, err = s.listByHost.QueryContext(ctx, host, n)
	}
	if err != nil {
		return nil, wrap(ctx, "list deferred", err)
	}
	out, bad, err := scanDeferred(rows)
	if err != nil {
		return nil, wrap(ctx, "list deferred", err)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("sqlitestore: list deferred: rows %v have no usable method or URL: %w", bad, ext.ErrCorruptState)
	}
	return out, nil
}

// scanDeferred decodes rows of deferredColumns (or spilledColumns) and closes them; bad are the IDs of
// the rows left out, whose method or URL is unusable.
func scanDeferred(rows *sql.Rows) (out []ext.DeferredRequest, bad []int64, err error) {
	defer rows.Close()
	var (
		vals [numDeferredColumns]any
		dest [numDeferredColumns]any
	)
	for i := range vals {
		dest[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(dest[:]...); err != nil {
			return nil, nil, err
		}
		r, ok := decodeDeferredRow(vals[:])
		if !ok {
			bad = append(bad, r.ID)
			continue
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return out, bad, nil
}

// decodeDeferredRow decodes a deferred row in deferredColumns' order. What cannot be decoded of the
// optional parts is left zero (a body that is not a BLOB is lost); ok is false when the method or URL
// cannot be used to send the request again. It never panics.
func decodeDeferredRow(vals []any) (r ext.DeferredRequest, ok bool) {
	if len(vals) != numDeferredColumns {
		return r, false
	}
	r.ID, _ = vals[0].(int64)
	r.Host, _ = vals[1].(string)
	r.Method, _ = vals[2].(string)
	r.URL, _ = vals[3].(string)
	if d, isInt := vals[4].(int64); isInt && int64(int(d)) == d {
		r.Depth = int(d)
	}
	if s, isText := vals[5].(string); isText {
		if json.Unmarshal([]byte(s), &r.Header) != nil {
			r.Header = nil
		}
	}
	switch b := vals[6].(type) {
	case nil:
	case []byte:
		if b == nil { // the driver reads an empty BLOB as nil
			b = []byte{}
		}
		r.Body = b
	default:
		r.BodyLost = true
	}
	if lost, _ := vals[7].(int64); lost != 0 {
		r.BodyLost = true
	}
	if s, isText := vals[8].(string); isText {
		if json.Unmarshal([]byte(s), &r.Ctx) != nil {
			r.Ctx = nil
		}
	}
	if at, isInt := vals[9].(int64); isInt {
		r.DeferredAt = decodeTime(at)
	}
	r.Reason, _ = vals[10].(string)
	return r, validMethod(r.Method) && validURL(r.URL)
}

// validMethod reports whether m is an HTTP token, as http.NewRequest requires.
func validMethod(m string) bool {
	return m != "" && strings.IndexFunc(m, func(c rune) bool {
		return c <= ' ' || c >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c)
	}) < 0
}

// validURL reports whether u is an absolute URL with a host, so the request can be sent again.
func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Host != ""
}

// DeleteDeferred implements ext.Store: one transaction for the batch; unknown IDs are ignored.
func (s *Store) DeleteDeferred(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	return s.writeTx(ctx, "delete deferred", func(tx *sql.Tx) error {
		stmt := tx.StmtContext(ctx, s.delDefer)
		for _, id := range ids {
			if _, err := stmt.ExecContext(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// SpillRequests implements ext.Store: one transaction for the batch.
func (s *Store) SpillRequests(ctx context.Context, host string, reqs []ext.DeferredRequest) error {
	if len(reqs) == 0 {
		return nil
	}
	return s.writeTx(ctx, "spill", func(tx *sql.Tx) error {
		stmt := tx.StmtContext(ctx, s.addSpill)
		for _, r := range reqs {
			r.Host = host
			args, err := requestArgs(r)
			if err != nil {
				return err
			}
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// TakeSpilled implements ext.Store: it reads host's oldest rows through the (host, id) index and
// deletes them in the same write transaction. Rows that cannot be decoded are deleted with them and
// named in the error wrapping ext.ErrCorruptState.
func (s *Store) TakeSpilled(ctx context.Context, host string, limit int) ([]ext.DeferredRequest, error) {
	n := int64(-1) // SQLite: no limit
	if limit > 0 {
		n = int64(limit)
	}
	var out []ext.DeferredRequest
	var bad []int64
	err := s.writeTx(ctx, "take spilled", func(tx *sql.Tx) error {
		rows, err := tx.StmtContext(ctx, s.takeSpill).QueryContext(ctx, host, n)
		if err != nil {
			return err
		}
		if out, bad, err = scanDeferred(rows); err != nil || len(out)+len(bad) == 0 {
			return err
		}
		ids := slices.Clone(bad) // the rows read are host's oldest: every row of host up to the newest one read
		for _, r := range out {
			ids = append(ids, r.ID)
		}
		_, err = tx.StmtContext(ctx, s.delSpill).ExecContext(ctx, host, slices.Max(ids))
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].ID = 0
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("sqlitestore: take spilled: rows %v have no usable method or URL, dropped: %w", bad, ext.ErrCorruptState)
	}
	return out, nil
}

// TakeDeferred implements ext.Store: it reads the oldest rows (of host) and deletes them in the same
// write transaction, so concurrent takers, in this process or another on the file, never both take a
// row. A row whose method or URL is unusable stays, and is named in the error wrapping
// ext.ErrCorruptState.
func (s *Store) TakeDeferred(ctx context.Context, host string, limit int) ([]ext.DeferredRequest, error) {
	n := int64(-1) // SQLite: no limit
	if limit > 0 {
		n = int64(limit)
	}
	var out []ext.DeferredRequest
	var bad []int64
	err := s.writeTx(ctx, "take deferred", func(tx *sql.Tx) error {
		var rows *sql.Rows
		var err error
		if host == "" {
			rows, err = tx.StmtContext(ctx, s.takeAll).QueryContext(ctx, n)
		} else {
			rows, err = tx.StmtContext(ctx, s.takeByHost).QueryContext(ctx, host, n)
		}
		if err != nil {
			return err
		}
		if out, bad, err = scanDeferred(rows); err != nil {
			return err
		}
		del := tx.StmtContext(ctx, s.delDefer)
		for _, r := range out {
			if _, err := del.ExecContext(ctx, r.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("sqlitestore: take deferred: rows %v have no usable method or URL: %w", bad, ext.ErrCorruptState)
	}
	return out, nil
}

// SpilledHosts implements ext.Store.
func (s *Store) SpilledHosts(ctx context.Context) (map[string]int, error) {
	rows, err := s.spillHosts.QueryContext(ctx)
	if err != nil {
		return nil, wrap(ctx, "count spilled", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var host string
		var n int
		if err := rows.Scan(&host, &n); err != nil {
			return nil, wrap(ctx, "count spilled", err)
		}
		out[host] = n
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, "count spilled", err)
	}
	return out, nil
}
