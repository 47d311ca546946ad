package policy

import "encoding/binary"

// The hash VR's consistent_hash and rendezvous_hash use (consistent_hash.rs
// fbi_hash): Facebook mcrouter's furc_hash over MurmurHash64A bit streams,
// then MurmurHash64A of the furc result's 4 little-endian bytes. Ported from
// the Rust source's behaviour; vectors in fbihash_test.go were produced by
// compiling the source's own functions.

const (
	murmurM      uint64 = 0xc6a4a7935bd1e995
	murmurR             = 47
	fbiSeed      uint32 = 4193360111
	furcShift           = 23
	furcMaxTries        = 32
	// fbiModulus is the largest furc_hash modulus, 2^23-1.
	fbiModulus uint32 = 1<<23 - 1
)

// murmurHash64A is MurmurHash64A (mcrouter lib/fbi/hash.c).
func murmurHash64A(key []byte, seed uint32) uint64 {
	h := uint64(seed) ^ (uint64(len(key)) * murmurM)
	n := len(key) / 8 * 8
	for i := 0; i < n; i += 8 {
		k := binary.LittleEndian.Uint64(key[i:])
		k *= murmurM
		k ^= k >> murmurR
		k *= murmurM
		h ^= k
		h *= murmurM
	}
	if rest := key[n:]; len(rest) > 0 {
		for i := len(rest) - 1; i >= 0; i-- {
			h ^= uint64(rest[i]) << (8 * uint(i))
		}
		h *= murmurM
	}
	h ^= h >> murmurR
	h *= murmurM
	h ^= h >> murmurR
	return h
}

// murmurRehash64A rehashes one uint64 (hash.c's murmur_rehash_64A).
func murmurRehash64A(k uint64) uint64 {
	m := murmurM // wrapping multiply at run time (constants do not wrap)
	h := uint64(fbiSeed) ^ (8 * m)
	k *= murmurM
	k ^= k >> murmurR
	k *= murmurM
	h ^= k
	h *= murmurM
	h ^= h >> murmurR
	h *= murmurM
	h ^= h >> murmurR
	return h
}

// furcHash maps key to [0, m).
func furcHash(key []byte, m uint32) uint32 {
	if m <= 1 {
		return 0
	}
	// Bit stream: 64 bits per MurmurHash64A value, each block the rehash of
	// the previous one, extended lazily.
	var blocks []uint64
	bit := func(idx uint32) uint32 {
		ord := int(idx >> 6)
		for len(blocks) <= ord {
			if len(blocks) == 0 {
				blocks = append(blocks, murmurHash64A(key, fbiSeed))
			} else {
				blocks = append(blocks, murmurRehash64A(blocks[len(blocks)-1]))
			}
		}
		return uint32(blocks[ord]>>(idx&0x3f)) & 1
	}
	var d uint32
	for m > 1<<d {
		d++
	}
	a := d
	for try := 0; try < furcMaxTries; try++ {
		for bit(a) == 0 {
			if d == 0 {
				return 0
			}
			d--
			a = d
		}
		a += furcShift
		num := uint32(1)
		for i := uint32(1); i < d; i++ { // d-1 more bits (saturating)
			num = num<<1 | bit(a)
			a += furcShift
		}
		if num < m {
			return num
		}
	}
	return 0
}

// fbiHash is VR's ConsistentHashPolicy::fbi_hash.
func fbiHash(key string) uint64 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], furcHash([]byte(key), fbiModulus))
	return murmurHash64A(b[:], fbiSeed)
}
