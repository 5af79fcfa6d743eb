package tensor

import "fmt"

// ONNX's TensorProto.DataType codes (onnx.proto), which ONNX Runtime's
// ONNXTensorElementDataType repeats, and the KServe datatype of each that
// Symphony serves. Codes without an entry (STRING, complex, 4- and 8-bit
// floats and integers) have no fixed-size KServe datatype.
var onnxTypes = map[int32]string{
	1: "FP32", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64",
	8: "BYTES", 9: "BOOL", 10: "FP16", 11: "FP64", 12: "UINT32", 13: "UINT64", 16: "BF16",
}

// onnxNames names the ONNX codes without a KServe datatype, for messages.
var onnxNames = map[int32]string{
	0: "UNDEFINED", 14: "COMPLEX64", 15: "COMPLEX128", 17: "FLOAT8E4M3FN",
	18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4",
}

// FromONNX is the KServe datatype of an ONNX element type code, or an
// error naming the type for one without.
func FromONNX(code int32) (string, error) {
	if dt, ok := onnxTypes[code]; ok {
		return dt, nil
	}
	if n, ok := onnxNames[code]; ok {
		return "", fmt.Errorf("element type %s has no KServe datatype", n)
	}
	return "", fmt.Errorf("unknown ONNX element type %d", code)
}

// ONNXCode is the ONNX element type code of a KServe datatype; ok is false
// for an unknown name.
func ONNXCode(datatype string) (code int32, ok bool) {
	for c, dt := range onnxTypes {
		if dt == datatype {
			return c, true
		}
	}
	return 0, false
}
