package serving

import "github.com/dexzd/dexzd/internal/engine"

// DecodeRecords decodes one log record of a batch (wal.Batch.Records[i]):
// the engine records of one Decide call, in order. The simulator reads
// the whole log with it to check which results committed.
func DecodeRecords(raw []byte) ([]engine.Record, error) { return decodeEnvelope(raw) }
