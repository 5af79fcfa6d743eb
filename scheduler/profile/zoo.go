package profile

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// ModelSpec is one entry of a bundled model zoo: a named model with its
// linear profile, latency SLO and, where the paper gives them, memory sizes.
type ModelSpec struct {
	Name  string
	Alpha time.Duration
	Beta  time.Duration
	SLO   time.Duration
	// StaticMemory and DynamicMemory are in bytes; zero where unknown.
	StaticMemory  int64
	DynamicMemory int64
}

// Profile returns the spec's linear profile with the default max batch.
func (s ModelSpec) Profile() Profile { return MustLinear(s.Alpha, s.Beta, 0) }

const mib = 1 << 20

func us(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }

// zoo1080Ti is Table 5 of the Symphony paper (NVIDIA 1080Ti), ordered by
// descending β/α as printed. Memory sizes come from Table 1 where it lists
// the model.
var zoo1080Ti = []ModelSpec{
	{"NASNetMobile", us(570), us(14348), 33 * time.Millisecond, 0, 0},
	{"MobileNetV3Small", us(335), us(5350), 20 * time.Millisecond, 0, 0},
	{"DenseNet169", us(1271), us(13618), 37 * time.Millisecond, 0, 0},
	{"DenseNet121", us(1061), us(10312), 29 * time.Millisecond, 99 * mib, 2172 * mib},
	{"DenseNet201", us(1733), us(15687), 45 * time.Millisecond, 0, 0},
	{"EfficientNetV2B0", us(1006), us(7493), 23 * time.Millisecond, 0, 0},
	{"MobileNetV3Large", us(820), us(5256), 20 * time.Millisecond, 0, 0},
	{"InceptionV3", us(1964), us(8771), 33 * time.Millisecond, 230 * mib, 3386 * mib},
	{"EfficientNetV2B1", us(1661), us(7247), 27 * time.Millisecond, 0, 0},
	{"ResNet50V2", us(1409), us(5947), 23 * time.Millisecond, 0, 0},
	{"ResNet152V2", us(3471), us(13049), 53 * time.Millisecond, 0, 0},
	{"ResNet101V2", us(2438), us(9095), 37 * time.Millisecond, 0, 0},
	{"InceptionResNetV2", us(5090), us(18368), 77 * time.Millisecond, 0, 0},
	{"EfficientNetB0", us(1569), us(5586), 23 * time.Millisecond, 88 * mib, 1519 * mib},
	{"MobileNetV2", us(1180), us(3483), 20 * time.Millisecond, 0, 0},
	{"ResNet101", us(3164), us(9065), 43 * time.Millisecond, 0, 0},
	{"EfficientNetB1", us(2489), us(6674), 33 * time.Millisecond, 0, 0},
	{"ResNet50", us(2050), us(5378), 27 * time.Millisecond, 170 * mib, 2798 * mib},
	{"EfficientNetV2B2", us(2254), us(5896), 29 * time.Millisecond, 0, 0},
	{"VGG19", us(3059), us(7857), 40 * time.Millisecond, 0, 0},
	{"ResNet152", us(4599), us(11212), 59 * time.Millisecond, 0, 0},
	{"MobileNet", us(1009), us(2390), 20 * time.Millisecond, 84 * mib, 2653 * mib},
	{"VGG16", us(2734), us(5786), 33 * time.Millisecond, 822 * mib, 6200 * mib},
	{"EfficientNetB2", us(3446), us(5333), 38 * time.Millisecond, 0, 0},
	{"EfficientNetV2B3", us(4072), us(5981), 44 * time.Millisecond, 0, 0},
	{"NASNetLarge", us(17656), us(18952), 179 * time.Millisecond, 0, 0},
	{"EfficientNetV2S", us(8463), us(8862), 85 * time.Millisecond, 0, 0},
	{"EfficientNetB3", us(5924), us(4849), 57 * time.Millisecond, 0, 0},
	{"EfficientNetV2L", us(40313), us(28208), 378 * time.Millisecond, 0, 0},
	{"EfficientNetV2M", us(22619), us(14786), 210 * time.Millisecond, 0, 0},
	{"EfficientNetB5", us(23435), us(10301), 208 * time.Millisecond, 0, 0},
	{"Xception", us(4751), us(2046), 42 * time.Millisecond, 0, 0},
	{"SSDMobilenet", us(23778), us(9729), 209 * time.Millisecond, 0, 0},
	{"EfficientNetB4", us(12088), us(4412), 105 * time.Millisecond, 0, 0},
	{"BERT", us(7008), us(159), 56 * time.Millisecond, 0, 0},
}

// zooA100 is Table 6 of the Symphony paper (NVIDIA A100).
var zooA100 = []ModelSpec{
	{"DenseNet121", us(54), us(10546), 21 * time.Millisecond, 0, 0},
	{"DenseNet201", us(304), us(14345), 31 * time.Millisecond, 0, 0},
	{"DenseNet169", us(289), us(13365), 29 * time.Millisecond, 0, 0},
	{"ResNet50V2", us(135), us(5560), 20 * time.Millisecond, 0, 0},
	{"EfficientNetB0", us(115), us(4326), 20 * time.Millisecond, 0, 0},
	{"ResNet101", us(284), us(8266), 20 * time.Millisecond, 0, 0},
	{"ResNet152", us(390), us(10449), 24 * time.Millisecond, 0, 0},
	{"ResNet101V2", us(391), us(8219), 20 * time.Millisecond, 0, 0},
	{"MobileNetV3Large", us(196), us(4072), 20 * time.Millisecond, 0, 0},
	{"EfficientNetB1", us(291), us(5797), 20 * time.Millisecond, 0, 0},
	{"ResNet50", us(268), us(5172), 20 * time.Millisecond, 0, 0},
	{"ResNet152V2", us(589), us(10054), 24 * time.Millisecond, 0, 0},
	{"MobileNetV2", us(190), us(2892), 20 * time.Millisecond, 0, 0},
	{"EfficientNetV2B3", us(543), us(7596), 20 * time.Millisecond, 0, 0},
	{"InceptionResNetV2", us(1112), us(15270), 39 * time.Millisecond, 0, 0},
	{"EfficientNetV2B1", us(443), us(5929), 20 * time.Millisecond, 0, 0},
	{"NASNetMobile", us(536), us(6860), 20 * time.Millisecond, 0, 0},
	{"EfficientNetV2B0", us(377), us(4272), 20 * time.Millisecond, 0, 0},
	{"EfficientNetB2", us(520), us(5333), 20 * time.Millisecond, 0, 0},
	{"MobileNetV3Small", us(315), us(3211), 20 * time.Millisecond, 0, 0},
	{"InceptionV3", us(913), us(6732), 20 * time.Millisecond, 0, 0},
	{"MobileNet", us(285), us(1901), 20 * time.Millisecond, 0, 0},
	{"EfficientNetV2S", us(1454), us(7378), 26 * time.Millisecond, 0, 0},
	{"EfficientNetV2B2", us(901), us(4532), 20 * time.Millisecond, 0, 0},
	{"VGG16", us(660), us(2252), 20 * time.Millisecond, 0, 0},
	{"EfficientNetB3", us(1239), us(4205), 20 * time.Millisecond, 0, 0},
	{"Xception", us(801), us(2638), 20 * time.Millisecond, 0, 0},
	{"VGG19", us(893), us(2181), 20 * time.Millisecond, 0, 0},
	{"NASNetLarge", us(3464), us(7154), 42 * time.Millisecond, 0, 0},
	{"EfficientNetV2M", us(4479), us(6861), 49 * time.Millisecond, 0, 0},
	{"EfficientNetB4", us(2881), us(4103), 31 * time.Millisecond, 0, 0},
	{"EfficientNetV2L", us(7520), us(6675), 73 * time.Millisecond, 0, 0},
	{"EfficientNetB5", us(6121), us(2283), 53 * time.Millisecond, 0, 0},
	{"SSDMobilenet", us(19448), us(4442), 164 * time.Millisecond, 0, 0},
	{"EfficientNetB6", us(9754), us(1984), 82 * time.Millisecond, 0, 0},
	{"EfficientNetB7", us(16339), us(2751), 136 * time.Millisecond, 0, 0},
	{"BERT", us(7353), us(222), 59 * time.Millisecond, 0, 0},
}

// zooTable4 holds the two single-model experiments of Table 4 (8 GPUs).
var zooTable4 = []ModelSpec{
	{"ResNet50", us(1053), us(5072), 25 * time.Millisecond, 0, 0},
	{"InceptionResNetV2", us(5090), us(18368), 70 * time.Millisecond, 0, 0},
}

var zoos = map[string][]ModelSpec{
	"1080ti": zoo1080Ti,
	"a100":   zooA100,
	"table4": zooTable4,
}

// Zoo returns a copy of the named bundled zoo: "1080ti" (Table 5, 35 models),
// "a100" (Table 6, 37 models) or "table4" (the two Table 4 models).
func Zoo(name string) ([]ModelSpec, error) {
	z, ok := zoos[strings.ToLower(name)]
	if !ok {
		return nil, fmt.Errorf("profile: unknown zoo %q (known: %s)", name, strings.Join(ZooNames(), ", "))
	}
	return append([]ModelSpec(nil), z...), nil
}

// ZooNames lists the bundled zoos in sorted order.
func ZooNames() []string {
	names := make([]string, 0, len(zoos))
	for n := range zoos {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
