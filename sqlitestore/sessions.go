package sqlitestore

import (
	"context"
	"database/sql"
	"time"
)

// The sessions: a record of the pacers using the file, which the ext package finds by these three
// methods (its store interface for them is unexported: no user calls them). A pacer records its session
// when it starts, again at every flush, and removes it in Close once its state is written; a pacer that
// starts and finds another's session on record knows that one ended without Close (killed, crashed),
// and holds every host its interval from its start (see the ext README's "What survives a SIGKILL").

// BeginSession records session id as using the file since at, in one write transaction: it reports
// whether another session is on record (a pacer that ended without Close, or one still running), and
// forgets them.
func (s *Store) BeginSession(ctx context.Context, id string, at time.Time) (bool, error) {
	var others int
	err := s.writeTx(ctx, "begin session", func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sessions WHERE id != ?", id).Scan(&others); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM sessions WHERE id != ?", id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, began_at, seen_at) VALUES (?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at`, id, encodeTime(at), encodeTime(at))
		return err
	})
	return others > 0, err
}

// TouchSession records that session id still uses the file at at: its row is written again (a later
// BeginSession may have forgotten it).
func (s *Store) TouchSession(ctx context.Context, id string, at time.Time) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO sessions (id, began_at, seen_at) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at`, id, encodeTime(at), encodeTime(at))
	if err != nil {
		return wrap(ctx, "touch session", err)
	}
	return nil
}

// EndSession removes session id's record: its pacer closed, every state written.
func (s *Store) EndSession(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, "DELETE FROM sessions WHERE id = ?", id); err != nil {
		return wrap(ctx, "end session", err)
	}
	return nil
}
