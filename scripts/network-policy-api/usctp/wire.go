package main

import (
	"encoding/binary"
	"hash/crc32"
)

// The SCTP common header (RFC 9260 §3.1): source port, destination port, verification tag,
// CRC32c checksum; chunks follow, each a type, flags and a 16-bit length, padded to 4 bytes.
const (
	headerSize     = 12
	chunkInit      = 1 // RFC 9260 §3.3.2
	chunkAbort     = 6 // RFC 9260 §3.3.7
	chunkHeaderLen = 4
)

// pion/sctp is made for WebRTC, where SCTP rides in DTLS and both ports are always 5000
// (RFC 8841 §5); it sends 5000→5000 and expects 5000→5000 back. The association's real ports
// live here instead: rewriteToWire puts them into what pion sends, rewriteFromWire gives pion
// back its 5000s. Either way the checksum is made anew, as it covers the ports.
const pionPort = 5000

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type ports struct{ src, dst uint16 }

func packetPorts(pkt []byte) ports {
	return ports{binary.BigEndian.Uint16(pkt[0:]), binary.BigEndian.Uint16(pkt[2:])}
}

// checksum is CRC32c over the packet with its checksum field as zero (RFC 9260 §6.8,
// appendix A); it is stored in the byte order Go's reflected CRC32c gives, little-endian.
func checksum(pkt []byte) uint32 {
	sum := crc32.Update(0, castagnoli, pkt[:8])
	sum = crc32.Update(sum, castagnoli, []byte{0, 0, 0, 0})
	return crc32.Update(sum, castagnoli, pkt[12:])
}

func checksumValid(pkt []byte) bool {
	return len(pkt) >= headerSize && binary.LittleEndian.Uint32(pkt[8:]) == checksum(pkt)
}

func setPorts(pkt []byte, p ports) {
	binary.BigEndian.PutUint16(pkt[0:], p.src)
	binary.BigEndian.PutUint16(pkt[2:], p.dst)
	binary.LittleEndian.PutUint32(pkt[8:], checksum(pkt))
}

func rewriteToWire(pkt []byte, p ports) []byte {
	out := append([]byte(nil), pkt...)
	setPorts(out, p)
	return out
}

func rewriteFromWire(pkt []byte) { setPorts(pkt, ports{pionPort, pionPort}) }

// hasChunk says whether a chunk of the given type is in the packet.
func hasChunk(pkt []byte, kind byte) bool {
	for off := headerSize; off+chunkHeaderLen <= len(pkt); {
		if pkt[off] == kind {
			return true
		}
		n := int(binary.BigEndian.Uint16(pkt[off+2:]))
		if n < chunkHeaderLen {
			return false
		}
		off += (n + 3) &^ 3
	}
	return false
}

// abortForInit is what a kernel SCTP stack answers to an INIT for a port nobody serves
// (RFC 9260 §8.4 rule 3, §8.5.1 rule B): an ABORT whose verification tag is the INIT's Initiate
// Tag, T bit clear, ports swapped. The caller has checked the first chunk is a whole INIT.
func abortForInit(init []byte) []byte {
	p := packetPorts(init)
	out := make([]byte, headerSize+chunkHeaderLen)
	copy(out[4:8], init[headerSize+chunkHeaderLen:headerSize+chunkHeaderLen+4]) // Initiate Tag
	out[headerSize] = chunkAbort
	binary.BigEndian.PutUint16(out[headerSize+2:], chunkHeaderLen)
	setPorts(out, ports{p.dst, p.src})
	return out
}

// firstChunkIsInit: an INIT must be the only chunk of its packet (RFC 9260 §6.10) and
// carries at least its 16 fixed bytes after the chunk header.
func firstChunkIsInit(pkt []byte) bool {
	return len(pkt) >= headerSize+chunkHeaderLen+16 && pkt[headerSize] == chunkInit
}
