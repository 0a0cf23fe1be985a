package mapping

import "slices"

// Counter is one cumulative input the product reads from the canonical
// page: a counter role's value, or one part (sum, count or buckets) of a
// histogram role. This is the one table of them: derive windows them,
// the diagnosis keeps their history and the routing view sums their
// families, each picking the entries it needs by these identifiers.
type Counter uint8

// The counter inputs, in the table's order (the routing view serves
// their families in it).
const (
	CounterTTFTBuckets Counter = iota
	CounterInterTokenLatencyBuckets
	CounterPrefixCacheHits
	CounterPrefixCacheQueries
	CounterExternalPrefixCacheHits
	CounterExternalPrefixCacheQueries
	CounterQueueTimeSum
	CounterQueueTimeCount
	CounterPrefillTimeSum
	CounterPrefillTimeCount
	CounterDecodeTimeSum
	CounterDecodeTimeCount
	CounterE2ELatencyBuckets
	CounterTimePerOutputTokenBuckets
	CounterPromptTokens
	CounterGenerationTokens
	CounterRequestPromptTokensSum
	CounterRequestPromptTokensCount
	CounterRequestGenerationTokensSum
	CounterRequestGenerationTokensCount
	CounterPreemptions
	CounterRequestsFinished
	CounterPromptTokensBySource
	CounterKVTransferTimeSum
	CounterKVTransferTimeCount
	CounterKVTransferTimeBuckets
	CounterKVTransferBytesSum
	CounterKVTransferFailures
	CounterKVOffloadLoadBytes
	CounterKVOffloadStoreBytes
	CounterTTFTCount
	CounterAdmissionRejections
	// NumCounters is the number of counter inputs, to size arrays by.
	NumCounters
)

// counterInputs is the table: the role and part each counter input reads.
var counterInputs = [NumCounters]struct {
	role Role
	part Part
}{
	CounterPreemptions:                  {RolePreemptions, PartValue},
	CounterPrefixCacheHits:              {RolePrefixCacheHits, PartValue},
	CounterPrefixCacheQueries:           {RolePrefixCacheQueries, PartValue},
	CounterExternalPrefixCacheHits:      {RoleExternalPrefixCacheHits, PartValue},
	CounterExternalPrefixCacheQueries:   {RoleExternalPrefixCacheQueries, PartValue},
	CounterPromptTokens:                 {RolePromptTokens, PartValue},
	CounterGenerationTokens:             {RoleGenerationTokens, PartValue},
	CounterRequestsFinished:             {RoleRequestsFinished, PartValue},
	CounterQueueTimeSum:                 {RoleQueueTime, PartSum},
	CounterQueueTimeCount:               {RoleQueueTime, PartCount},
	CounterPrefillTimeSum:               {RolePrefillTime, PartSum},
	CounterPrefillTimeCount:             {RolePrefillTime, PartCount},
	CounterDecodeTimeSum:                {RoleDecodeTime, PartSum},
	CounterDecodeTimeCount:              {RoleDecodeTime, PartCount},
	CounterRequestPromptTokensSum:       {RoleRequestPromptTokens, PartSum},
	CounterRequestPromptTokensCount:     {RoleRequestPromptTokens, PartCount},
	CounterRequestGenerationTokensSum:   {RoleRequestGenerationTokens, PartSum},
	CounterRequestGenerationTokensCount: {RoleRequestGenerationTokens, PartCount},
	CounterTTFTBuckets:                  {RoleTTFT, PartBucket},
	CounterInterTokenLatencyBuckets:     {RoleInterTokenLatency, PartBucket},
	CounterE2ELatencyBuckets:            {RoleE2ELatency, PartBucket},
	CounterTimePerOutputTokenBuckets:    {RoleTimePerOutputToken, PartBucket},
	CounterPromptTokensBySource:         {RolePromptTokensBySource, PartValue},
	CounterKVTransferTimeSum:            {RoleKVTransferTime, PartSum},
	CounterKVTransferTimeCount:          {RoleKVTransferTime, PartCount},
	CounterKVTransferTimeBuckets:        {RoleKVTransferTime, PartBucket},
	CounterKVTransferBytesSum:           {RoleKVTransferBytes, PartSum},
	CounterKVTransferFailures:           {RoleKVTransferFailures, PartValue},
	CounterKVOffloadLoadBytes:           {RoleKVOffloadLoadBytes, PartValue},
	CounterKVOffloadStoreBytes:          {RoleKVOffloadStoreBytes, PartValue},
	CounterTTFTCount:                    {RoleTTFT, PartCount},
	CounterAdmissionRejections:          {RoleAdmissionRejections, PartValue},
}

// Role is the role whose family the input is read from.
func (c Counter) Role() Role { return counterInputs[c].role }

// Part is which samples of the role's family the input is.
func (c Counter) Part() Part { return counterInputs[c].part }

// CounterRoles returns the roles of the counter inputs, each once, in the
// table's order: the counter and histogram families the product reads.
func CounterRoles() []Role {
	out := make([]Role, 0, NumCounters)
	for c := range NumCounters {
		if r := c.Role(); !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}
