package connsync

import "github.com/dplb/dplb/lcore"

// The record layout is also the handover's (ctl/handover): a restarting
// lbd hands its table to the next one in the records a peer would get.

// AppendRecord appends r in the message record layout (RecordLen bytes).
func AppendRecord(dst []byte, r lcore.SyncConn) []byte { return appendRecord(dst, &r) }

// DecodeRecord reads one record (the first RecordLen bytes of b) and
// reports whether it is a possible connection or template.
func DecodeRecord(b []byte) (lcore.SyncConn, bool) {
	if len(b) < RecordLen {
		return lcore.SyncConn{}, false
	}
	return decodeRecord(b[:RecordLen])
}

// AppendExtRecord appends r, with its extension, in the extended record
// layout (ExtRecordLen bytes).
func AppendExtRecord(dst []byte, r lcore.SyncConn) []byte {
	return appendExt(appendRecord(dst, &r), &r.Ext)
}

// DecodeExtRecord reads one extended record (the first ExtRecordLen bytes
// of b) and reports whether it is a possible connection.
func DecodeExtRecord(b []byte) (lcore.SyncConn, bool) {
	if len(b) < ExtRecordLen {
		return lcore.SyncConn{}, false
	}
	return decodeExtRecord(b[:ExtRecordLen])
}

// AppendRecord6 appends r, an IPv6 connection, in the IPv6 record layout
// (Record6Len bytes).
func AppendRecord6(dst []byte, r lcore.SyncConn) []byte { return appendRecord6(dst, &r) }

// DecodeRecord6 reads one IPv6 record (the first Record6Len bytes of b)
// and reports whether it is a possible connection.
func DecodeRecord6(b []byte) (lcore.SyncConn, bool) {
	if len(b) < Record6Len {
		return lcore.SyncConn{}, false
	}
	return decodeRecord6(b[:Record6Len])
}

// AppendFTPRecord appends r, an FTP control connection, with its helper's
// state, in the FTP record layout (FTPRecordLen bytes).
func AppendFTPRecord(dst []byte, r lcore.SyncConn) []byte {
	return appendFTP(appendRecord(dst, &r), &r)
}

// DecodeFTPRecord reads one FTP record (the first FTPRecordLen bytes of
// b) and reports whether it is a possible control connection.
func DecodeFTPRecord(b []byte) (lcore.SyncConn, bool) {
	if len(b) < FTPRecordLen {
		return lcore.SyncConn{}, false
	}
	return decodeFTPRecord(b[:FTPRecordLen])
}

// AppendFullNAT6Record appends r, an FNAT66 connection, in its record
// layout (FullNAT6RecordLen bytes).
func AppendFullNAT6Record(dst []byte, r lcore.SyncConn) []byte { return appendFullNAT6(dst, &r) }

// DecodeFullNAT6Record reads one FNAT66 record (the first
// FullNAT6RecordLen bytes of b) and reports whether it is a possible
// connection.
func DecodeFullNAT6Record(b []byte) (lcore.SyncConn, bool) {
	if len(b) < FullNAT6RecordLen {
		return lcore.SyncConn{}, false
	}
	return decodeFullNAT6(b[:FullNAT6RecordLen])
}
