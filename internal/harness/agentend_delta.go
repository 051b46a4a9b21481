package harness

import (
	"encoding/json"
	"hash/maphash"
)

// sentTranscript remembers what the agent end holder keeps of a session
// after it accepted turn turnID: the transcript and inputs it was sent,
// as one checksum per event. The next turn.start to it may then carry only
// the events after the longest run of the next transcript that it holds
// already, byte for byte.
type sentTranscript struct {
	holder, turnID string
	seed           maphash.Seed
	sums           []uint64 // of the transcript's events, then the inputs'
}

// newSentTranscript remembers what holder was sent in start; nil when the
// agent end keeps nothing (holder is "").
func newSentTranscript(holder string, start *TurnStart) *sentTranscript {
	if holder == "" {
		return nil
	}
	s := &sentTranscript{holder: holder, turnID: start.TurnID, seed: maphash.MakeSeed(),
		sums: make([]uint64, 0, len(start.Transcript)+len(start.Inputs))}
	for _, ev := range start.Transcript {
		s.sums = append(s.sums, maphash.Bytes(s.seed, ev))
	}
	for _, ev := range start.Inputs {
		s.sums = append(s.sums, maphash.Bytes(s.seed, ev))
	}
	return s
}

// delta returns start's transcript as a delta over what the holder keeps:
// the events after the longest prefix of the transcript that it holds
// (the same bytes, in the same order). Nil when nothing is remembered or
// nothing is shared: the whole transcript goes.
func (s *sentTranscript) delta(start *TurnStart) *TranscriptDelta {
	if s == nil {
		return nil
	}
	n := 0
	for n < len(start.Transcript) && n < len(s.sums) && maphash.Bytes(s.seed, start.Transcript[n]) == s.sums[n] {
		n++
	}
	if n == 0 {
		return nil
	}
	return &TranscriptDelta{Holder: s.holder, Base: s.turnID, Since: start.transcriptIDs[n-1],
		Events: append([]json.RawMessage{}, start.Transcript[n:]...)}
}
